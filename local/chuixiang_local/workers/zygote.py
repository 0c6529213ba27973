"""The process local Lambda workers are forked from (``python -m chuixiang_local.workers.zygote``).

A Lambda sandbox has an init phase (imports, clients) outside the invocation's
Timeout, and is reused warm. Locally, starting a fresh interpreter and importing
boto3, Powertools, pydantic and the layer costs ~0.5 s of CPU per process; sixty at
once on two cores starve each other for seconds. So this zygote imports the heavy
third-party modules and the layer once (with the environment every function
shares; per-function settings are read at call time) and loads boto3's service
models. At a function's first request it forks that function's own zygote, which
takes the function's environment and imports its handler module (the init: its
clients, settings and app) once; every worker of the function is forked from it,
initialised, as a Lambda sandbox restored from a snapshot would be. A worker
connects to the engine and serves invocations over a Unix socket until it is
killed. Sixty cold sandboxes at once then cost sixty forks, not sixty inits.
Single-threaded on purpose: forking a threaded process is unsafe.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import resource
import shutil
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any, BinaryIO

from chuixiang_local import LAMBDA_GC_THRESHOLDS

#: What :data:`PRELOAD` and the service models read of the environment as they load: a zygote forked from one that
#: loaded them (:mod:`chuixiang_local.workers.zygote_root`) is a fresh one only where these are the same
#: (tests/pipeline/test_zygote_root.py records what the imports read).
IMPORT_ENV = (
    "AWS_CONFIG_FILE",
    "AWS_DATA_PATH",
    "AWS_DEFAULT_PROFILE",
    "AWS_EXECUTION_ENV",
    "AWS_LAMBDA_INITIALIZATION_TYPE",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "HOME",
    "POWERTOOLS_DEBUG",
    "POWERTOOLS_TRACE_MIDDLEWARES",
    "PYDANTIC_DISABLE_PLUGINS",
)

#: Imported once here; every worker inherits them already loaded.
PRELOAD = (
    "boto3",
    "botocore.session",
    "botocore.client",
    "botocore.loaders",
    "httpx",
    # What the functions' inits import beyond the above (~20 ms of CPU less a recipe or image init): httpx's transport
    # (httpcore, h11, anyio, imported when a client is made), boto3's table and S3 resources, the API's validation.
    "httpcore",
    "encodings.idna",
    "boto3.dynamodb.table",
    "boto3.dynamodb.transform",
    "boto3.s3.inject",
    "pydantic",
    "pydantic_settings",
    "aws_lambda_powertools",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.utilities.parser",
    "aws_lambda_powertools.utilities.typing",
    "aws_lambda_powertools.utilities.idempotency",
    "aws_lambda_powertools.event_handler",
    "aws_lambda_powertools.event_handler.middlewares.openapi_validation",
    "json",
    "decimal",
    "uuid",
    "chuixiang_local.workers.context",
)


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n")


def worker(request: dict[str, Any]) -> None:
    """A forked worker of a function zygote (already the function: its environment, directory and path):
    init (the handler module, imported by the zygote unless that failed), then serve invocations until
    killed or disconnected."""
    from chuixiang_local.workers.context import LocalContext

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(request["socket"])
    _send(sock, {"hello": request["worker_id"], "pid": os.getpid()})
    started = time.monotonic()
    module_name, _, func_name = request["handler"].rpartition(".")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except Exception as exc:  # reported like Runtime.ImportModuleError
        traceback.print_exc()
        _send(sock, {"init_error": {"errorType": "Runtime.ImportModuleError", "errorMessage": str(exc)}})
        os._exit(1)
    _send(sock, {"ready": True, "init_ms": int((time.monotonic() - started) * 1000)})
    for line in sock.makefile("rb"):  # one JSON line per invocation, until the engine hangs up
        message = json.loads(line)
        context = LocalContext(
            function_name=request["env"]["AWS_LAMBDA_FUNCTION_NAME"],
            memory_limit_in_mb=int(request["env"]["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"]),
            aws_request_id=message["request_id"],
            deadline_ms=message["deadline_ms"],
            invoked_function_arn=request["env"].get("CHUIXIANG_FUNCTION_ARN", ""),
        )
        try:
            out: dict[str, Any] = {"result": func(message["event"], context)}
        except Exception as exc:  # reported like the Lambda runtime does
            traceback.print_exc()
            out = {
                "error": {
                    "errorType": type(exc).__name__,
                    "errorMessage": str(exc),
                    "stackTrace": traceback.format_exception(exc),
                }
            }
        sys.stdout.flush()
        sys.stderr.flush()
        out["max_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Lambda's "Max Memory Used"
        _send(sock, out)
    os._exit(0)


#: Service models every function's clients load (from JSON on disk, ~50 ms of CPU each).
SERVICE_MODELS = ("dynamodb", "s3", "stepfunctions", "secretsmanager", "sts")


def load_service_models(services: tuple[str, ...] = SERVICE_MODELS) -> None:
    """Load the service models into boto3's default session, which every worker inherits: its
    clients then build from memory. No client is created here (they read the function's env)."""
    import boto3

    loader = boto3._get_default_session()._loader
    for kind in ("service-2", "resources-1"):  # what a client and a resource list first (a walk of boto3's data)
        loader.list_available_services(kind)
    for service in services:
        loader.load_service_model(service, "service-2")
        loader.load_service_model(service, "endpoint-rule-set-1")
    loader.load_service_model("dynamodb", "resources-1")
    loader.load_data("endpoints")
    loader.load_data("partitions")


#: The layer's modules, imported with the environment every function shares (``CHUIXIANG_PRELOAD_PATH``).
LAYER_PRELOAD = ("chuixiang.steps", "chuixiang.api", "chuixiang.schemas", "chuixiang.observability")


def main() -> None:
    # Ctrl-C reaches the whole foreground group; the pool that started us stops us (and our forks,
    # which inherit this) itself, without a KeyboardInterrupt traceback from each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    take_nice()
    preload()
    become_zygote()


def take_nice() -> None:
    """The niceness the pool asked for (``CHUIXIANG_WORKER_NICE``), before any work: the workers inherit it."""
    os.nice(int(os.environ.get("CHUIXIANG_WORKER_NICE", "0")))


def preload() -> None:
    """What every zygote imports first, whatever its environment (only :data:`IMPORT_ENV` is read meanwhile)."""
    for name in PRELOAD:
        importlib.import_module(name)
    share_loaders()
    load_service_models()


def share_loaders() -> None:
    """Every botocore session made in this process and its forks reads boto3's data through one loader per data
    path, the one :func:`load_service_models` fills: a session made anew at a function's init (Powertools'
    Parameters makes its own) parses the same JSON from disk otherwise, ~45 ms of CPU a function a cloud. botocore
    reads that data only (each session already shares it among its clients); what is read stays what it was."""
    import botocore.loaders
    import botocore.session

    made: dict[str | None, botocore.loaders.Loader] = {}
    create = botocore.loaders.create_loader

    def create_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in made:
            made[search_path_string] = create(search_path_string)
        return made[search_path_string]

    botocore.session.create_loader = create_loader  # the name session.py calls


def become_zygote() -> None:
    """After :func:`preload`: the layer imported with this process's environment, then workers forked on request
    (from ``stdin``) until it closes."""
    paths = [p for p in os.environ.get("CHUIXIANG_PRELOAD_PATH", "").split(os.pathsep) if p]
    if paths:
        sys.path[:0] = paths
        for name in LAYER_PRELOAD:
            importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    _say_ready()
    serve(sys.stdin.buffer)
    # End of input: the pool closed, or its process died outright (SIGKILL) and could not remove
    # the directory of its socket itself; a killed ``serve`` left one in /tmp per run before.
    shutil.rmtree(os.environ.get("CHUIXIANG_WORKER_DIR", ""), ignore_errors=True)


def _say_ready() -> None:
    """Tell the pool the modules are loaded: a function's init is timed from here, not from this process's start."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.path.join(os.environ["CHUIXIANG_WORKER_DIR"], "w.sock"))
        _send(sock, {"hello": os.environ["CHUIXIANG_ZYGOTE_ID"], "pid": os.getpid()})


def serve(requests: BinaryIO) -> None:
    """Hand each request to its function's zygote, forked from this one at the function's first
    request; it runs the function's init once, then forks an initialised worker per request."""
    functions: dict[str, BinaryIO] = {}
    for line in requests:
        request = json.loads(line)
        if request.get("retire"):  # every function's zygote ends (its pipe closes); the next request inits anew
            for pipe in functions.values():
                _close_quietly(pipe)
            functions.clear()
            continue
        key = json.dumps([request["handler"], request["cwd"], request["sys_path"], request["env"]], sort_keys=True)
        if key in functions and not _handed(functions[key], line):  # that function's zygote died (killed)
            _close_quietly(functions.pop(key))
        if key not in functions:
            functions[key] = _fork_function_zygote(request, functions)
            _handed(functions[key], line)


def _fork_function_zygote(request: dict[str, Any], functions: dict[str, BinaryIO]) -> BinaryIO:
    """A new function zygote for ``request``'s function; the pipe its requests go through."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:
        os.close(write_fd)
        for other in functions.values():  # its siblings must see their pipe close with this zygote
            other.close()
        function_zygote(request, os.fdopen(read_fd, "rb"))
        os._exit(0)
    os.close(read_fd)
    return os.fdopen(write_fd, "wb")


def _handed(pipe: BinaryIO, line: bytes) -> bool:
    """``line`` written to a function zygote; False when it is gone (its pipe broke): this zygote lives on."""
    try:
        pipe.write(line)
        pipe.flush()
    except (BrokenPipeError, OSError):
        return False
    return True


def _close_quietly(pipe: BinaryIO) -> None:
    with contextlib.suppress(OSError):  # a broken pipe's buffered bytes cannot be flushed: nothing to keep
        pipe.close()


def function_zygote(first: dict[str, Any], requests: BinaryIO) -> None:
    """Become the function (environment, directory, handler module imported: its init), then fork a
    worker per request. An init that fails here is left to each worker, which reports it as Lambda
    would (``Runtime.ImportModuleError``)."""
    layer = sys.modules.get("chuixiang")
    layer_dir = str(Path(layer.__file__ or "").parent.parent) if layer is not None else None
    if layer_dir is not None and layer_dir not in first["sys_path"]:  # a version with another layer
        for name in [n for n in sys.modules if n == "chuixiang" or n.startswith("chuixiang.")]:
            del sys.modules[name]
        sys.path[:] = [p for p in sys.path if p != layer_dir]
    gc.set_threshold(*LAMBDA_GC_THRESHOLDS)  # the function's init and invocations collect as in Lambda
    os.environ.clear()
    os.environ.update(first["env"])
    os.chdir(first["cwd"])
    sys.path[:0] = first["sys_path"]
    with contextlib.suppress(Exception):  # the worker's own import reports it
        importlib.import_module(first["handler"].rpartition(".")[0])
    # Forking is safe because no handler starts a thread at import (tests/pipeline/test_layer_build.py checks).
    gc.freeze()  # the collector never walks what the workers inherit, so it stays shared, not copied
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            requests.close()  # the request pipe belongs to the zygote
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            try:
                worker(request)
            except BaseException:  # outside the handler (which reports its own): say why, or the engine only
                traceback.print_exc()  # sees a closed connection (Runtime.ExitError, no cause in the log)
                sys.stderr.flush()
            finally:
                os._exit(1)


if __name__ == "__main__":
    main()
