"""``chuixiang``: cook a dish, serve the API, invoke one function, check the ladder - locally.

Exit codes: 0 success (SUCCEEDED), 1 the job FAILED (or a function errored),
2 bad usage or configuration (including a broken timeout ladder).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess  # nosec B404  # starts our own API process with fixed arguments
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from chuixiang.observability import logger
from chuixiang.settings import comma_list
from chuixiang_local.cloud.concurrency import DEFAULT_QUOTA
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.cloud.moto_patches import EngineError
from chuixiang_local.commands.ladder import build_ladder, check_or_raise, markdown_table, reservation_problems
from chuixiang_local.commands.watch import JobWatch
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.gateway.api_server import LOCAL_IMAGES_PATH, function_argument
from chuixiang_local.gateway.demo_site import DemoSite, demo_origin
from chuixiang_local.model.fake_model import FakeModel, FakeModelProcess
from chuixiang_local.template import REPO_ROOT, ConfigError, Template, parse_overrides

WORK_DIR = REPO_ROOT / ".chuixiang"
#: Where ``chuixiang cloud`` says where it runs (``chuixiang seed`` reads it).
CLOUD_STATE = WORK_DIR / "cloud.json"


def _progress(msg: str) -> None:
    print(f"[chuixiang] {msg}", file=sys.stderr, flush=True)


#: ``serve``'s function workers yield the CPU to the API and the local cloud (see ``LocalCloud``).
SERVE_WORKER_NICE = 10


@contextlib.contextmanager
def local_stack(args: argparse.Namespace, log: TextIO | None) -> Iterator[LocalCloud]:
    """Ladder check, then the fake model (unless a URL is given), then the local cloud."""
    overrides = parse_overrides(args.parameter_overrides)
    check_or_raise(Template(overrides))
    fake: FakeModelProcess | None = None
    base_url = args.model_base_url
    bind = getattr(args, "bind", "127.0.0.1")
    if not base_url:
        fake = FakeModelProcess(pace_s=args.fake_pace_ms / 1000, host=bind, port=getattr(args, "model_port", 0))
        base_url = fake.start()
        _progress(f"embedded fake model at {base_url} ({args.fake_pace_ms} ms per chunk)")
    cloud = LocalCloud(
        overrides,
        model_base_url=base_url,
        work_dir=WORK_DIR,
        log=log,
        worker_nice=SERVE_WORKER_NICE if args.command == "serve" else 0,
        front_door_first=args.command == "serve" and args.front_door_first,
        port=getattr(args, "cloud_port", 0),
        bind=bind,
        account_concurrency=getattr(args, "account_concurrency", DEFAULT_QUOTA),
    )
    try:
        cloud.start()
        yield cloud
    finally:
        cloud.stop()
        if fake:
            fake.stop()


def cmd_cook(args: argparse.Namespace) -> int:
    log_path = WORK_DIR / "logs" / f"cook-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w", encoding="utf-8") as log, local_stack(args, log) as cloud:
        _progress(f"local cloud up (moto at {cloud.endpoint}); function logs: {log_path}")
        api = LocalApi(cloud)
        status, body = api.post_dish(args.dish)
        if status != 202:
            print(json.dumps(body, ensure_ascii=False, indent=2))
            _progress(f"POST /recipes -> {status} {body['error']['code']}: {body['error'].get('reason')}")
            return 2 if status == 400 else 1
        _progress(f"POST /recipes -> 202 job {body['jobId']}")
        watch = JobWatch()
        try:
            doc = api.wait(body["jobId"], cloud.template.number("ClientGiveUpSeconds"), on_doc=watch)
        finally:
            watch.close()
    print(json.dumps(doc, ensure_ascii=False, indent=2) if args.json else _summary(doc))
    return 0 if doc.get("status") == "SUCCEEDED" else 1


def _summary(doc: dict[str, Any]) -> str:
    lines = [f"{doc['dish']}: {doc['status']}"]
    if doc.get("error"):
        lines.append(f"  error: {doc['error']['code']} - {doc['error']['message']}")
    recipe = doc.get("recipe")
    if recipe:
        lines.append(f"  {recipe['summary']}")
        lines += [f"  {s['order']}. {s['text']}" for s in recipe["steps"]]
    if doc.get("image"):
        lines.append(f"  image: {doc['image']['url']}")
    if doc.get("imageError"):
        lines.append(f"  image error: {doc['imageError']['code']} - {doc['imageError']['message']}")
    lines.append(f"  metrics: {json.dumps(doc.get('metrics'), ensure_ascii=False)}")
    return "\n".join(lines)


def _with_demo_origin(args: argparse.Namespace) -> None:
    """``--demo-port``: the page's origin must be allowed by CORS; add it to ``CorsAllowOrigins`` if it is not."""
    if not args.demo_port:
        return
    origin = demo_origin(args.host, args.demo_port)
    overrides = parse_overrides(args.parameter_overrides)
    listed = [
        o for o in (overrides.get("CorsAllowOrigins") or Template({}).parameters["CorsAllowOrigins"]).split(",") if o
    ]
    if origin not in listed:
        overrides["CorsAllowOrigins"] = ",".join([*listed, origin])
        _progress(f"CorsAllowOrigins += {origin} (the demo page's origin)")
    args.parameter_overrides = [f"{k}={v}" for k, v in overrides.items()]


def cmd_serve(args: argparse.Namespace) -> int:
    """The local cloud here; the API in its own process (see :mod:`chuixiang_local.gateway.api_server`)."""
    _with_demo_origin(args)
    with contextlib.ExitStack() as stack:
        log = sys.stderr if args.verbose else stack.enter_context(_log_file("serve"))
        return _serve(args, stack.enter_context(local_stack(args, log)))


def _log_file(command: str) -> TextIO:
    """The functions' log of one local run (their EMF too: ``chuixiang dashboard`` reads it)."""
    path = WORK_DIR / "logs" / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Append mode (O_APPEND): serve's api process writes the api function's output to this file too, and a handle
    # that kept its own offset would write over what the other appended.
    return open(path, "a", encoding="utf-8")  # closed by the caller's ExitStack


def _file_name(log: Any) -> str | None:
    """The path of the functions' log, when it is a file (``--verbose``: stderr, which the api inherits)."""
    name = getattr(log, "name", None)
    return name if isinstance(name, str) and not name.startswith("<") else None


def _serve(args: argparse.Namespace, cloud: LocalCloud) -> int:
    spec = cloud.template.function_by_dir("api")
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host  # nosec B104  # a URL, not a bind
    extra_env = {**cloud.api_environment(), "LOCAL_IMAGE_BASE_URL": f"http://{host}:{args.port}{LOCAL_IMAGES_PATH}"}
    env = {**os.environ, **extra_env, "PYTHONPATH": os.pathsep.join(map(str, cloud.layer_dirs()))}
    api = subprocess.Popen(  # nosec B603  # sys.executable and our own module
        [
            sys.executable,
            "-m",
            "chuixiang_local.gateway.api_server",
            "--host",
            args.host,
            "--port",
            str(args.port),
            "--workers",
            str(args.workers),
            "--body-idle-seconds",
            str(args.body_idle_seconds),
            "--body-total-seconds",
            str(args.body_total_seconds),
            "--function",
            function_argument(spec, cloud.layer_dirs(), extra_env),
            "--jwt-issuer",
            cloud.template.parameters["JwtIssuer"],
            "--jwt-audience",
            cloud.template.parameters["JwtAudience"],
            *(["--requests-file", str(cloud.api_requests.path)] if cloud.api_requests else []),
            *(["--log-file", log_name] if (log_name := _file_name(cloud.log)) else []),
        ],
        # stdin: it exits with this process (see exit_with_parent); a session of its own: Ctrl-C is
        # this process's to handle (a drain first), not a signal that stops the API mid-drain.
        env=env,
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    draining = threading.Event()

    def stop(*_: Any) -> None:
        if not draining.is_set():  # the first signal: drain
            draining.set()
            api.send_signal(signal.SIGUSR1)
            return
        _progress("stopping: the API process")  # the second: at once
        _exit_if_still_stopping_after(SERVE_STOP_LIMIT_S)
        api.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if not _accepts(args.host, args.port, api):
        _progress(f"the API process ended before it listened on {args.host}:{args.port} (exit {api.returncode})")
        return 1
    _progress(
        f"API on http://{args.host}:{args.port}  (POST /recipes, GET /recipes/{{jobId}}, "
        f"/openapi.json, Swagger UI at /swagger); the local cloud (moto) at {cloud.endpoint}; Ctrl-C stops "
        f"(jobs in flight get {args.drain_seconds:g} s to finish; twice: at once)"
    )
    demo = DemoSite(args.host, args.demo_port, f"http://{host}:{args.port}") if args.demo_port else None
    if demo:
        demo.start()
        _progress(f"demo page on {demo.origin}/ (calls the API cross-origin)")
    _wait_interruptibly(api, until=draining)
    if demo:
        demo.stop()
    died = not draining.is_set() and api.poll() is not None
    if died:  # nobody asked it to stop: say so, and exit with an error (a supervisor restarts serve)
        code = api.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        _progress(f"error: the API process died ({how}); stopping the local cloud")
    if draining.is_set() and api.poll() is None:
        _drain(cloud, api, args.drain_seconds)
        if api.poll() is None:
            stop()
            _wait_interruptibly(api)
    for first in (cloud.front_door, cloud.call_priority):
        if first is not None:
            _progress(first.summary())
    _progress("stopping: the local cloud and the model")
    _progress("stopped")
    return 1 if died else 0


def _drain(cloud: LocalCloud, api: subprocess.Popen[bytes], bound_s: float) -> None:
    """Let the executions running now finish, for at most ``bound_s`` (or until a second signal stops the
    API), then say how many finished and how many were cut."""
    running = set(cloud.running_executions())
    _progress(
        f"draining: no new jobs (503 + Retry-After), polls answered; {len(running)} job(s) in flight, "
        f"up to {bound_s:g} s"
    )
    end = time.monotonic() + bound_s
    left = running
    while left and time.monotonic() < end and api.poll() is None:
        time.sleep(0.2)
        left = running & set(cloud.running_executions())
    if api.poll() is None:  # not stopped at once by a second signal
        _progress(f"drained: {len(running) - len(left)} finished, {len(left)} cut")


def _accepts(host: str, port: int, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> bool:
    """Whether the API's port accepts connections (within ``timeout_s``, while ``proc`` runs): "API on …" is
    printed only once it is true, so whoever reads it can connect at once."""
    until = time.monotonic() + timeout_s
    while time.monotonic() < until and proc.poll() is None:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _wait_interruptibly(proc: subprocess.Popen[bytes], until: threading.Event | None = None) -> None:
    """Wait for ``proc`` (or ``until``) in short waits. The kernel may hand SIGTERM to any of this process's threads;
    Python then only runs the handler once the main thread is back in the interpreter, which a
    plain ``wait()`` (one blocking ``waitpid``) never is while the child lives: ``serve`` ignored
    SIGTERM about two times in three with sixty executions running."""
    while until is None or not until.is_set():
        try:
            proc.wait(timeout=0.2)
            return
        except subprocess.TimeoutExpired:
            continue


#: How long ``serve`` may take to stop once asked (it takes well under a second).
SERVE_STOP_LIMIT_S = 10.0


def _exit_if_still_stopping_after(seconds: float) -> None:
    """A stop must end: should a step hang (a child that ignores SIGTERM, a server that never wakes),
    exit anyway after ``seconds``, saying so; the last "stopping:" line on stderr names the step."""

    def bail() -> None:
        time.sleep(seconds)
        _progress(f"still stopping after {seconds:g} s; exiting now")
        os._exit(1)

    threading.Thread(target=bail, name="stop-limit", daemon=True).start()


def cmd_invoke(args: argparse.Namespace) -> int:
    event = json.loads(Path(args.event).read_text()) if args.event else {}
    with local_stack(args, sys.stderr) as cloud:
        spec = cloud.template.function_by_dir(args.function)
        cloud.seed_job_for(event)
        result = cloud.invoke(spec, event)
    print(json.dumps(result.payload, ensure_ascii=False, indent=2))
    _progress(
        f"{spec.logical_id}: {'error ' + str(result.error_type) if result.failed else 'ok'} in {result.duration_ms} ms"
    )
    return 1 if result.failed else 0


def cmd_cloud(args: argparse.Namespace) -> int:
    """Keep the local cloud up on a fixed port for SAM's local tools; write their env-vars file."""
    from chuixiang_local.commands.sam_env import write_files

    log_path = WORK_DIR / "logs" / f"cloud-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    with open(log_path, "w", encoding="utf-8") as log, local_stack(args, log) as cloud:
        env_file, state_file = Path(args.env_vars), Path(args.state)
        write_files(cloud, env_file, state_file, args.host_address)
        _progress(
            f"local cloud up: moto at {cloud.endpoint} (from a container: {args.host_address}); "
            f"function logs: {log_path}"
        )
        _progress(
            f"env-vars file for SAM: {env_file}; then, e.g.:\n"
            f"  .venv/bin/chuixiang seed -e events/recipe.json\n"
            f"  sam local invoke RecipeFunction -e events/recipe.json --env-vars {env_file}\n"
            f"  sam local start-api --env-vars {env_file}\nCtrl-C stops it."
        )
        while not stopping.wait(0.5):
            pass
    state_file.unlink(missing_ok=True)
    _progress("stopped")
    return 0


def cmd_seed(args: argparse.Namespace) -> int:
    """Create, in the running ``chuixiang cloud``, the job an event names (as ``invoke`` does before invoking)."""
    import boto3

    from chuixiang.settings import Settings
    from chuixiang.stores.jobs import JobStore
    from chuixiang_local.cloud.local_cloud import seed_job

    state_file = Path(args.state)
    if not state_file.exists():
        raise ConfigError("no local cloud is running: start `chuixiang cloud` first")
    state = json.loads(state_file.read_text())
    event = json.loads(Path(args.event).read_text())
    table = boto3.resource(
        "dynamodb",
        endpoint_url=state["endpoint"],
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # nosec B106  # moto
    ).Table(state["table"])
    created = seed_job(JobStore(Settings.model_validate({"JOBS_TABLE": state["table"]}), table), event)
    job = event.get("jobId") if isinstance(event, dict) else None
    _progress(
        f"job {job} created RUNNING" if created else f"nothing to create (job {job} exists, or the event names none)"
    )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from chuixiang_local.commands import bench

    if args.routing:
        from chuixiang_local.commands import routing_bench

        routing_bench.main(args.jobs, args.chart)
        return 0
    if args.sections:
        from chuixiang_local.commands import sections_bench

        if args.model_base_url and not args.models:
            raise ConfigError("--models is required with --model-base-url")
        sections_bench.main(
            args.runs if args.runs > 1 else 8,
            args.chart,
            concurrency=args.concurrency,
            base_url=args.model_base_url or "",
            models=list(comma_list(args.models or "")),
            out=args.json_out,
        )
        return 0

    given = parse_overrides(args.parameter_overrides)
    models = list(comma_list(args.models or ""))
    dishes = list(comma_list(args.dishes or "")) or list(bench.DEFAULT_DISHES)
    if args.runs < 1 or args.concurrency < 1:
        raise ConfigError("--runs and --concurrency must be at least 1")
    fake: FakeModel | None = None
    extra: dict[str, Any] = {}
    overrides = given
    base_url = args.model_base_url
    if not base_url:
        models = models or bench.default_models()
        fake = FakeModel(pace_s=args.fake_pace_ms / 1000)
        base_url = fake.start()
        overrides = bench.scaled_overrides(Template(), fake.time_scale, given)
        extra["fakeTimeScale"] = round(fake.time_scale, 4)
        _progress(
            f"embedded fake model at {base_url}: profiles play {1 / fake.time_scale:.0f}x faster than "
            f"real time, recipe limits scaled alike"
        )
    elif not models:
        raise ConfigError("--models is required with --model-base-url")
    template = Template(overrides)
    settings = bench.bench_settings(template, base_url)
    started = bench.started_at()
    bar = bench.progress_bar(len(models) * len(dishes) * args.runs)
    failed = 0

    def done(call: bench.BenchCall) -> None:
        nonlocal failed
        failed += not call.valid
        bar.set_postfix(failed=failed)
        bar.update()

    logger.setLevel("WARNING")  # one log line per call would mix with the table; calls.csv has them all
    function_ms = template.function_by_dir("recipe").timeout_s * 1000
    try:
        calls = bench.run_bench(
            settings, models, dishes, args.runs, args.concurrency, bench.api_key_from_env(), function_ms, done
        )
    finally:
        bar.close()
        if fake:
            fake.stop()
    rows = bench.summarise(calls, models)
    parameters = {
        p: str(template.parameters[p])
        for p in sorted(template.parameters)
        if p.startswith("Recipe") and p not in ("RecipeModel", "RecipeFallbackModels")
    }
    doc = bench.document(rows, parameters, started, {"dishes": dishes, **extra})
    written = bench.write_outputs(Path(args.out), doc, calls, settings)
    if args.json:
        print(json.dumps(doc, ensure_ascii=False))
    else:
        print(bench.table(rows))
        if fake:
            print(
                f"(fake time: the profiles and the recipe limits run {1 / fake.time_scale:.1f}x faster than real "
                "time; multiply times by that, divide tokens/s)"
            )
    _progress("wrote " + ", ".join(str(p) for p in written))
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from chuixiang_local.commands import dashboard

    paths = [Path(p) for p in args.logs] or [WORK_DIR / "logs"]
    widgets = dashboard.build(Template(parse_overrides(args.parameter_overrides)), dashboard.read_points(paths))
    print(dashboard.report(widgets))
    metric = [w for w in widgets if w.kind == "metric"]
    empty = [w for w in metric if not w.has_data]
    print(f"{len(metric) - len(empty)} of {len(metric)} metric widgets have data (from {', '.join(map(str, paths))})")
    if args.out:
        dashboard.draw(widgets, Path(args.out))
        _progress(f"wrote {args.out}")
    return 1 if args.strict and empty else 0


def cmd_cost(args: argparse.Namespace) -> int:
    from chuixiang_local.commands.cost import Assumptions, render, report

    overrides = parse_overrides(args.parameter_overrides)
    check_or_raise(Template(overrides))
    _progress("running a generated, a cached and a failed job on the local cloud to count their AWS calls…")
    doc = report(
        overrides,
        Assumptions(recipe_seconds=args.recipe_seconds, image_seconds=args.image_seconds, image_mb=args.image_mb),
    )
    print(json.dumps(doc, ensure_ascii=False, indent=2) if args.json else render(doc))
    return 0


def cmd_ladder(args: argparse.Namespace) -> int:
    overrides = parse_overrides(args.parameter_overrides)
    if args.deployed:
        overrides = _what_deploy_deploys(overrides, _stack_name(args.stack_name))
    template = Template(overrides)
    ladder = build_ladder(template)
    if args.account:
        ladder.problems += _account_problems(template)
        if not args.unpaged:
            ladder.problems += _paging_problems(overrides, _stack_name(args.stack_name))
        ladder.problems += _key_policy_problems(template, _stack_name(args.stack_name))
    if args.deployed or args.account:
        ladder.problems += stack_name_problems(template, _stack_name(args.stack_name))
    if args.account_concurrency is not None:
        ladder.problems += [p for p in reservation_problems(template, args.account_concurrency) if "quota" in p]
    print(markdown_table(template) if args.markdown else ladder.render())
    if not ladder.ok:
        for line in ladder.failures():
            print(f"error: {line}", file=sys.stderr)
        return 2
    return 0


#: EventBridge Scheduler's limit on a schedule's name; the canary's is "<stack>-canary".
SCHEDULE_NAME_MAX = 64


def stack_name_problems(template: Template, stack_name: str) -> list[str]:
    """Names the stack derives that AWS bounds: with CanaryModels, the canary's schedule ``<stack>-canary``."""
    name = f"{stack_name}-canary"
    if template.parameters.get("CanaryModels") and len(name) > SCHEDULE_NAME_MAX:
        return [
            f"the canary's schedule would be named {name!r} ({len(name)} characters): EventBridge Scheduler takes "
            f"at most {SCHEDULE_NAME_MAX}; use a stack name of at most {SCHEDULE_NAME_MAX - len('-canary')} characters"
        ]
    return []


def _stack_name(given: str | None) -> str:
    from chuixiang_local.commands.deploy_parameters import samconfig_stack_name

    return given or samconfig_stack_name(REPO_ROOT / "samconfig.toml") or "chuixiang"


def _what_deploy_deploys(command_line: dict[str, str], name: str) -> dict[str, str]:
    """The deployed stack's values, then the command line's overrides, or else samconfig.toml's (as ``sam deploy``)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from chuixiang_local.commands.deploy_parameters import deployed_parameters, samconfig_overrides, what_sam_deploys

    samconfig = REPO_ROOT / "samconfig.toml"
    try:
        previous = deployed_parameters(boto3.client("cloudformation"), name)
        print(
            f"checking stack {name}: {len(previous)} deployed parameter values kept unless overridden", file=sys.stderr
        )
    except (BotoCoreError, ClientError) as exc:
        print(
            f"note: stack {name}'s deployed parameters could not be read ({exc}); checking samconfig.toml "
            f"and the command line over the template's defaults",
            file=sys.stderr,
        )
        previous = {}
    return what_sam_deploys(previous, samconfig_overrides(samconfig), command_line)


def _account_problems(template: Template) -> list[str]:
    """The reservation against the account's quota, read with the caller's credentials (a deploy has them)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from chuixiang_local.commands.ladder import account_concurrency

    try:
        limit, reserved = account_concurrency(boto3.client("lambda"))
    except (BotoCoreError, ClientError) as exc:
        print(
            f"note: the account's concurrency quota could not be read ({exc}); reservation not checked against it",
            file=sys.stderr,
        )
        return []
    own = [p for p in reservation_problems(template, limit, reserved) if "quota" in p]
    print(f"account: concurrency quota {limit}, {reserved} already reserved", file=sys.stderr)
    return own


#: The functions that read the model secret (ModelApiKeySecretArn), by their roles' logical ids.
SECRET_READERS = ("RecipeFunctionRole", "ImageFunctionRole", "CanaryFunctionRole")


def _key_policy_problems(template: Template, stack_name: str) -> list[str]:
    """With ModelApiKeyKmsKeyArn: whether the key's policy lets the functions' roles decrypt the model secret
    (read with the caller's credentials; the roles from the stack once it exists)."""
    key = template.parameters.get("ModelApiKeyKmsKeyArn", "")
    if not key:
        return []
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from chuixiang_local.commands.key_policy import key_policy_problems

    try:
        policy = boto3.client("kms").get_key_policy(KeyId=key, PolicyName="default")["Policy"]
        account = boto3.client("sts").get_caller_identity()["Account"]
        roles = _stack_role_arns(boto3.client("cloudformation"), stack_name, key.split(":")[1], account)
    except (BotoCoreError, ClientError) as exc:
        print(f"note: the key policy of {key} could not be read ({exc}); not checked", file=sys.stderr)
        return []
    return key_policy_problems(policy, key, account, key.split(":")[1], roles)


def _stack_role_arns(cloudformation: Any, stack_name: str, partition: str, account: str) -> list[str]:
    """The secret readers' role ARNs in the deployed stack (none before its first deploy)."""
    from botocore.exceptions import ClientError

    try:
        resources = cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]
    except ClientError:  # no stack yet (ValidationError): the check says what the first deploy needs
        return []
    return [
        f"arn:{partition}:iam::{account}:role/{r['PhysicalResourceId']}"
        for r in resources
        if r["LogicalResourceId"] in SECRET_READERS
    ]


def _paging_problems(parameters: dict[str, str], stack_name: str) -> list[str]:
    """Whether the stack's alarms would reach anyone: the deploy's parameters, else the topic's confirmed
    subscribers (read with the caller's credentials; unreadable is a note, as for the quota)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from chuixiang_local.commands.paging import confirmed_subscriptions, deployed_topic, paging_problems

    try:
        topic = deployed_topic(boto3.client("cloudformation"), stack_name)
        subscribed = confirmed_subscriptions(boto3.client("sns"), topic) if topic else []
    except (BotoCoreError, ClientError) as exc:
        print(f"note: stack {stack_name}'s alarm topic could not be read ({exc}); paging not checked", file=sys.stderr)
        return []
    print(f"alarms: {len(subscribed)} confirmed subscriber(s) on {topic or 'no topic yet'}", file=sys.stderr)
    return paging_problems(parameters, subscribed)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="chuixiang", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)

    def account_quota(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--account-concurrency",
            type=int,
            default=DEFAULT_QUOTA,
            metavar="N",
            help=f"the AWS account's Lambda concurrent-executions quota (default {DEFAULT_QUOTA}; some "
            "new accounts get 10): the state machine's invocations beyond it are throttled as Lambda "
            "throttles them",
        )

    def common(p: argparse.ArgumentParser, model: bool = True) -> None:
        p.add_argument(
            "--parameter-overrides", nargs="+", metavar="KEY=VALUE", help="template parameters, as for `sam deploy`"
        )
        if model:
            p.add_argument(
                "--model-base-url",
                help="OpenAI-compatible base URL (default: embedded fake model); "
                "MODEL_API_KEY is sent as the bearer token",
            )
            p.add_argument("--fake-pace-ms", type=float, default=2.0, help="fake model delay between chunks")

    p = sub.add_parser("cook", help="run one job end to end")
    p.add_argument("dish")
    p.add_argument("--json", action="store_true", help="print the job document as JSON")
    common(p)
    p.set_defaults(func=cmd_cook)

    p = sub.add_parser("serve", help="serve the API on loopback")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.add_argument("--verbose", action="store_true", help="function logs on stderr")
    p.add_argument("--workers", type=int, default=16, help="api invocations at once (warm api function processes)")
    p.add_argument(
        "--demo-port", type=int, default=0, help="also serve the demo page (clients/demo) on this port (0: no page)"
    )
    p.add_argument(
        "--body-idle-seconds",
        type=float,
        default=10,
        help="a request whose headers or body stall this long is answered 408 (it never holds the functions)",
    )
    p.add_argument(
        "--body-total-seconds",
        type=float,
        default=30,
        help="a request whose body takes longer in all is answered 408 (HTTP API's integration timeout)",
    )
    p.add_argument(
        "--drain-seconds",
        type=float,
        default=30,
        help="on SIGTERM or Ctrl-C, how long the jobs in flight may take to finish (a second signal: stop at once)",
    )
    p.add_argument(
        "--no-front-door-first",
        dest="front_door_first",
        action="store_false",
        help="do not hold the state machine's invocations while API calls are in flight, nor "
        "serve the api function's AWS calls first in moto (on by default: on AWS the API "
        "never shares a CPU or a DynamoDB server with the functions)",
    )
    account_quota(p)
    common(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("invoke", help="invoke one function, like `sam local invoke`")
    p.add_argument("function", help="recipe | image | submit | api | reconcile (or a logical id)")
    p.add_argument("-e", "--event", help="event JSON file (events/*.json)")
    common(p)
    p.set_defaults(func=cmd_invoke)

    p = sub.add_parser("bench", help="send the recipe request to several models; time and check every answer")
    p.add_argument(
        "--models",
        help="comma-separated models (default, offline: the embedded profiles fake-steady, "
        "fake-peak, fake-late-start, fake-broken-json, fake-length, fake-thinker)",
    )
    p.add_argument("--dishes", help="comma-separated dishes (default: 番茄炒蛋,红烧肉)")
    p.add_argument("--runs", type=int, default=1, help="runs of every (model, dish)")
    p.add_argument("--concurrency", type=int, default=4, help="calls at once")
    p.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    p.add_argument("--out", default=str(WORK_DIR / "bench"), help="directory for bench.json, calls.csv, bench.png")
    p.add_argument(
        "--routing",
        action="store_true",
        help="compare RecipeRouting ordered and fastest and hedging over the write-up's measured models "
        "(off-peak, peak, a queued primary), offline, time scaled down",
    )
    p.add_argument(
        "--sections",
        action="store_true",
        help="compare RecipeSections whole and parallel over the write-up's peak, off-peak and a key capped in "
        "tokens/s (offline, time scaled down; --runs jobs per mode, default 8), or over --models at --model-base-url",
    )
    p.add_argument("--jobs", type=int, default=20, help="with --routing: jobs per scenario and strategy")
    p.add_argument("--chart", default="", help="with --routing or --sections: where to draw the chart (PNG)")
    p.add_argument("--json-out", default="", help="with --sections: write every job and the summary here (JSON)")
    common(p)
    p.set_defaults(func=cmd_bench, fake_pace_ms=3.0)

    p = sub.add_parser(
        "cost",
        help="AWS cost per 1 000 jobs (generated, cached, failed) from the template "
        "and AWS calls counted on the local cloud",
    )
    p.add_argument("--recipe-seconds", type=float, default=86.0, help="production recipe stream time (default 86)")
    p.add_argument("--image-seconds", type=float, default=30.0, help="production image generation time")
    p.add_argument("--image-mb", type=float, default=1.5, help="stored and downloaded image size")
    p.add_argument("--json", action="store_true", help="the figures and the measured counts as JSON")
    common(p, model=False)
    p.set_defaults(func=cmd_cost)

    p = sub.add_parser(
        "dashboard",
        help="the template's dashboard drawn from the metrics local runs emitted (the EMF in their logs)",
    )
    p.add_argument("--logs", nargs="*", default=[], help="log files or folders (default .chuixiang/logs)")
    p.add_argument("--out", help="draw it to this PNG")
    p.add_argument("--strict", action="store_true", help="exit 1 when a metric widget has no data")
    p.add_argument("--parameter-overrides", nargs="*", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=cmd_dashboard)

    p = sub.add_parser("cloud", help="keep the local cloud up on a fixed port for `sam local invoke`/`start-api`")
    p.add_argument("--port", dest="cloud_port", type=int, default=4566, help="moto's port (default 4566)")
    p.add_argument("--model-port", type=int, default=8765, help="the embedded fake model's port")
    p.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address moto and the fake model listen on; 0.0.0.0 lets containers on Linux reach them",
    )
    p.add_argument(
        "--host-address",
        default="host.docker.internal",
        help="how a container reaches this machine (written into the env-vars file)",
    )
    p.add_argument("--env-vars", default=str(WORK_DIR / "sam-env.json"), help="where to write SAM's env-vars file")
    p.add_argument("--state", default=str(CLOUD_STATE), help="where to say where the cloud runs (for `seed`)")
    account_quota(p)
    common(p)
    p.set_defaults(func=cmd_cloud)

    p = sub.add_parser("seed", help="create, in the running `chuixiang cloud`, the job an event names")
    p.add_argument("-e", "--event", required=True, help="an event file, e.g. events/recipe.json")
    p.add_argument("--state", default=str(CLOUD_STATE), help="the file `chuixiang cloud --state` wrote")
    p.set_defaults(func=cmd_seed)

    p = sub.add_parser("ladder", help="print and check the timeout ladder")
    p.add_argument("--markdown", action="store_true", help="print the ladder as docs/ladder.md's table")
    p.add_argument(
        "--account",
        action="store_true",
        help="also check the reservation, the admitted jobs and the API's peak against the AWS account's "
        "concurrency quota, and that the alarms would page someone (read with your credentials)",
    )
    p.add_argument(
        "--unpaged",
        action="store_true",
        help="with --account: accept a stack whose alarms reach nobody (no AlarmEmail, no AlarmHttpsEndpoint, "
        "no confirmed subscriber on its topic)",
    )
    p.add_argument(
        "--account-concurrency",
        type=int,
        metavar="N",
        help="the same check against a quota of N, without AWS (a new account may have 10)",
    )
    p.add_argument(
        "--deployed",
        action="store_true",
        help="check what `sam deploy` will deploy: the stack's current values, then --parameter-overrides "
        "(which replace samconfig.toml's parameter_overrides, as in sam deploy) or else samconfig.toml's",
    )
    p.add_argument("--stack-name", help="with --deployed or --account (default: samconfig.toml's stack_name)")
    common(p, model=False)
    p.set_defaults(func=cmd_ladder)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"chuixiang: configuration error: {exc}", file=sys.stderr)
        return 2
    except EngineError as exc:
        print(f"chuixiang: local engine error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def entry() -> None:
    """The ``chuixiang`` command: ``main``, then exit without tearing the interpreter down. Every local
    resource is stopped by then (workers killed, servers shut, logs flushed); what is left is
    collecting moto's and botocore's millions of objects, about a second for nothing."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
