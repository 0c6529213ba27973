"""What a ``chuixiang`` command imports before its first local cloud, loaded once by a root that forks commands.

A command's process spends ~1.8 s of CPU importing the runner, moto (its server and the backends a local cloud
uses), Flask and boto3 before it does anything; the tests start ~40 of them (``serve`` above all). A root loaded
with :data:`PRELOAD` (``ZygoteRoot(env, kind="command")``, :mod:`chuixiang_local.workers.zygote_root`) forks a
process per command that runs as ``python -m chuixiang_local.commands.cli`` would: the CLI's own module is run as
``__main__`` in the fork (never preloaded), with the caller's arguments, environment and standard streams.

A fork is a fresh command only where what the loading read is the same: :data:`IMPORT_ENV` (what these imports
read of the environment; ``tests/pipeline/test_command_root.py`` records it), the interpreter's ``PYTHON*``, the
interpreter and the directory. The random generators the imports made (moto's ids) are seeded again in each fork,
as a fresh process seeds its own.
"""

from __future__ import annotations

import gc
import importlib
import random
import runpy
import signal
import sys

from chuixiang_local.workers.zygote import IMPORT_ENV as ZYGOTE_IMPORT_ENV
from chuixiang_local.workers.zygote import load_service_models

#: The module ``python -m`` runs for a command.
CLI = "chuixiang_local.commands.cli"

#: The CLI's commands and what a local cloud's start imports (moto's server, the backends the stack uses).
PRELOAD = (
    "chuixiang_local.commands.bench_cmd",
    "chuixiang_local.commands.cloud_cmd",
    "chuixiang_local.commands.cook_cmd",
    "chuixiang_local.commands.cost_cmd",
    "chuixiang_local.commands.dashboard_cmd",
    "chuixiang_local.commands.invoke_cmd",
    "chuixiang_local.commands.ladder_cmd",
    "chuixiang_local.commands.seed_cmd",
    "chuixiang_local.commands.serve_cmd",
    "chuixiang_local.cloud.local_cloud",
    "moto.server",
    "moto.awslambda_simple.models",
    "moto.cloudwatch.models",
    "moto.dynamodb.models",
    "moto.events.models",
    "moto.iam.models",
    "moto.kms.models",
    "moto.logs.models",
    "moto.s3.models",
    "moto.secretsmanager.models",
    "moto.sqs.models",
    "moto.stepfunctions.parser.models",
    "moto.sts.models",
)

#: The services of a local cloud, by botocore's names for their models, read once by the root rather than by every
#: fork at its first calls (~0.35 s of CPU a ``serve``): moto reads a service's model to parse and serialize its
#: requests and its regions to make its backend, the IAM gate a REST service's routes, the cloud's own clients
#: boto3's default session's.
SERVICES = (
    "cloudwatch",
    "dynamodb",
    "events",
    "iam",
    "kms",
    "lambda",
    "logs",
    "s3",
    "secretsmanager",
    "sqs",
    "stepfunctions",
    "sts",
)

#: What :data:`PRELOAD` reads of the environment as it loads: what a worker zygote's loading reads (boto3's
#: configuration, Powertools', pydantic's), then the locale, moto's settings and the Powertools settings the
#: product's ``observability`` module reads at import. A fork is a fresh command only where these are the same.
IMPORT_ENV = (
    *ZYGOTE_IMPORT_ENV,
    "AWS_LAMBDA_LOG_LEVEL",
    "CUSTOM_ACCESS_OVERRIDES_FILE",
    "DEFAULT_CONTAINER_REGISTRY",
    "INITIAL_NO_AUTH_ACTION_COUNT",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "LOG_LEVEL",
    "MOTO_ACM_VALIDATION_WAIT",
    "MOTO_AMIS_PATH",
    "MOTO_DISABLE_GLOBAL_CORS",
    "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION",
    "MOTO_ENABLE_AMI_VALIDATION",
    "MOTO_ENABLE_KEYPAIR_VALIDATION",
    "MOTO_ENABLE_RECORDING",
    "MOTO_LAMBDA_DATA_DIR",
    "MOTO_MAX_FORM_MEMORY_SIZE",
    "MOTO_PRETTIFY_RESPONSES",
    "MOTO_RECORDER_FILEPATH",
    "POWERTOOLS_DEV",
    "POWERTOOLS_LOGGER_SAMPLE_RATE",
    "POWERTOOLS_LOG_DEDUPLICATION_DISABLED",
    "POWERTOOLS_LOG_LEVEL",
    "POWERTOOLS_METRICS_NAMESPACE",
    "POWERTOOLS_SERVICE_NAME",
    "PY_SAX_PARSER",
    "S3_IGNORE_SUBDOMAIN_BUCKETNAME",
    "S3_UPLOAD_PART_MIN_SIZE",
    "TESTS_SKIP_REQUIRES_DOCKER",
    "TEST_PROXY_MODE",
    "TEST_SERVER_MODE",
)

#: The random generators :func:`preload` made (moto's ids among them): each fork seeds them again.
GENERATORS: list[random.Random] = []


def preload() -> None:
    """Import :data:`PRELOAD` and read the models of :data:`SERVICES`; keep the random generators the imports made."""
    for name in PRELOAD:
        importlib.import_module(name)
    read_models()
    GENERATORS[:] = [o for o in gc.get_objects() if isinstance(o, random.Random)]


def read_models() -> None:
    """Read :data:`SERVICES`' models where a local cloud's first calls would (each cache lives as long as the
    process, so a fork reads what a fresh process would have read)."""
    from moto.core.base_backend import AccountSpecificBackend
    from moto.core.utils import get_service_model

    from chuixiang_local.cloud.iam.calls import read_routes

    for service in SERVICES:
        get_service_model(service)
    read_routes(SERVICES)
    load_service_models(SERVICES)
    regions = AccountSpecificBackend.get_session()  # the regions each backend lists as it is made (~0.1 s a serve)
    for partition in regions.get_available_partitions():
        for service in SERVICES:
            regions.get_available_regions(service, partition_name=partition)


def reseed() -> None:
    """Seed what the loading's generators would have been seeded with in a fresh process (the system's entropy):
    two forks of one root never make the same ids."""
    for generator in GENERATORS:
        generator.seed()


def become_command(argv: list[str]) -> None:
    """In a fork of the root: ``python -m chuixiang_local.commands.cli *argv``, from the CLI's first line on (the
    command ends the process: ``cli.entry`` exits, argparse raises ``SystemExit``)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # the root ignores it; a fresh process does not
    reseed()
    sys.argv = [sys.argv[0], *argv]  # run_module puts the module's path first, as ``-m`` does
    sys.orig_argv = [sys.executable, "-m", CLI, *argv]
    runpy.run_module(CLI, run_name="__main__", alter_sys=True)
