"""The api function behind uvicorn, in a process of its own (``chuixiang serve`` starts it).

API Gateway and the Lambdas it invokes do not share a CPU with Step Functions and
DynamoDB; locally, the moto server and the state machine interpreter run in the
``serve`` process, so the API front door gets its own process here. Each request
is one invocation of the api function on a warm worker process of its own, as
each is a Lambda sandbox serving one request at a time: the Powertools resolver
keeps the current event on its class and the Logger its keys on the process, so
requests must never share an interpreter. Swagger UI (``/swagger``), which the
deployed API does not serve, is answered here.

    python -m chuixiang_local.gateway.api_server --fd 3 --function '{"spec": …, "layer_dirs": …, "extra_env": …}'
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stack_template import FunctionSpec

from chuixiang_local.cloud.front_door import SharedCount
from chuixiang_local.servers import exit_with_parent
from chuixiang_local.workers.invoker import Invocation, WorkerPool, invoke, lambda_env

#: What API Gateway (HTTP API) answers when the function itself fails or times out.
FUNCTION_ERROR = {
    "statusCode": 500,
    "headers": {"content-type": "application/json"},
    "body": json.dumps({"message": "Internal Server Error"}),
}
FUNCTION_TIMEOUT = {
    "statusCode": 503,
    "headers": {"content-type": "application/json"},
    "body": json.dumps({"message": "Service Unavailable"}),
}


def function_argument(spec: FunctionSpec, layer_dirs: list[Path], extra_env: dict[str, str]) -> str:
    """``--function``: what the API process needs to run the api function as the engine would."""
    return json.dumps(
        {
            "spec": {**vars(spec), "code_dir": str(spec.code_dir)},
            "layer_dirs": [str(d) for d in layer_dirs],
            "extra_env": extra_env,
        }
    )


#: Where ``serve`` serves the pictures local jobs drew (``LOCAL_IMAGE_BASE_URL``), standing in for S3's URLs.
LOCAL_IMAGES_PATH = "/local-images"
#: How long an idle keep-alive connection stays open. uvicorn's default, 5 s, is the longest ``pollAfterMs``: a
#: client that polls on one connection as told sends its GET just as the server closes the connection, and
#: gets "Server disconnected without sending a response" (CI, with the machine busy). Longer than any poll
#: interval, as a gateway's idle timeout is (API Gateway holds idle connections far longer than 5 s).
KEEP_ALIVE_S = 60
#: A picture's name there: the image key's digest and its extension, nothing that could leave the folder.
_IMAGE_NAME = re.compile(r"[0-9a-f]{8,64}\.(png|jpg|jpeg|webp)")
_IMAGE_TYPES = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp"}


def local_images(folder: Path) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A handler answering ``GET /local-images/<name>`` from ``folder`` (404 for anything else)."""

    def answer(event: dict[str, Any]) -> dict[str, Any]:
        name = str(event.get("rawPath", "")).removeprefix(f"{LOCAL_IMAGES_PATH}/")
        target = folder / name
        if not _IMAGE_NAME.fullmatch(name) or not target.is_file():
            return {
                "statusCode": 404,
                "headers": {"content-type": "application/json"},
                "body": '{"message": "Not Found"}',
            }
        return {
            "statusCode": 200,
            "headers": {"content-type": _IMAGE_TYPES[name.rsplit(".", 1)[1]], "cache-control": "max-age=3600"},
            "body": base64.b64encode(target.read_bytes()).decode(),
            "isBase64Encoded": True,
        }

    return answer


def as_proxy_response(result: Invocation) -> dict[str, Any]:
    if result.error_type == "Sandbox.Timedout":
        return FUNCTION_TIMEOUT
    if result.failed or not isinstance(result.payload, dict):
        return FUNCTION_ERROR
    return result.payload


def counting_open_requests(app: Any, count: SharedCount) -> Any:
    """ASGI middleware: ``count`` is the number of HTTP requests whose body has arrived and whose answer
    has not been sent (only the event loop's thread writes it). A request counts from its last body byte,
    not its first: one client that stalls mid-body must not hold every Lambda dispatch for the bound."""

    async def counted(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        counting = False

        async def receiving() -> Any:
            nonlocal counting
            message = await receive()
            if not counting and message.get("type") == "http.request" and not message.get("more_body"):
                count.add(1)
                counting = True
            return message

        try:
            await app(scope, receiving, send)
        finally:
            if counting:
                count.add(-1)

    return counted


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fd", type=int, required=True, help="the listening socket serve bound and handed over")
    ap.add_argument("--workers", type=int, default=16, help="api invocations at once (warm worker processes)")
    ap.add_argument("--function", required=True, help="the api function (see function_argument)")
    ap.add_argument("--jwt-issuer", default="", help="the template's JwtIssuer: check tokens as API Gateway would")
    ap.add_argument("--jwt-audience", default="", help="the template's JwtAudience (comma-separated)")
    ap.add_argument(
        "--body-idle-seconds", type=float, default=10.0, help="a request whose body stalls this long is answered 408"
    )
    ap.add_argument(
        "--body-total-seconds", type=float, default=30.0, help="a request whose body takes longer is answered 408"
    )
    ap.add_argument("--log-file", help="append the api function's output here (the functions' log), not to stderr")
    ap.add_argument(
        "--requests-fd", type=int, help="keep the count of open requests in this file (serve's front door first)"
    )
    args = ap.parse_args()

    import uvicorn

    from chuixiang.api_gate import cors_config, handle
    from chuixiang_local.gateway.asgi import LambdaAsgi
    from chuixiang_local.gateway.http_protocol import JsonErrorH11Protocol
    from chuixiang_local.gateway.jwt_authorizer import JwtAuthorizer

    given = json.loads(args.function)
    spec = FunctionSpec(**{**given["spec"], "code_dir": Path(given["spec"]["code_dir"])})
    layer_dirs = [Path(d) for d in given["layer_dirs"]]
    extra_env: dict[str, str] = given["extra_env"]
    env = lambda_env(spec, extra_env)
    sys_path = [str(spec.code_dir), *map(str, layer_dirs)]
    # The api function's output (its logs and EMF) goes where the other functions' goes, as a Lambda's stdout goes
    # to its log group: `chuixiang dashboard` reads the API and admission rows from it.
    function_log = open(args.log_file, "a", encoding="utf-8", buffering=1) if args.log_file else sys.stderr  # noqa: SIM115
    pool = WorkerPool(function_log, env=env, code_dirs=[*layer_dirs, spec.code_dir], max_idle=args.workers)
    pool.prewarm(spec, env, sys_path, args.workers)

    def run(event: dict[str, Any]) -> dict[str, Any]:
        return as_proxy_response(invoke(spec, event, pool=pool, layer_dirs=layer_dirs, extra_env=extra_env))

    swagger_apps: list[Any] = []  # built at the first request for it: the API's own requests never need it
    swagger_lock = threading.Lock()  # the resolver is one request at a time (see above)

    def swagger(event: dict[str, Any]) -> dict[str, Any]:
        with swagger_lock:
            if not swagger_apps:
                from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

                from chuixiang.api import build_app

                swagger_apps.append(build_app(APIGatewayHttpResolver, swagger=True))
            return handle(swagger_apps[0], event, None)

    cors = cors_config(env.get("CORS_ALLOW_ORIGINS", ""))
    asgi = LambdaAsgi(
        run,
        workers=args.workers,
        local_routes={"/swagger": swagger, LOCAL_IMAGES_PATH: local_images(Path(env.get("LOCAL_IMAGE_DIR", ".")))},
        cors=(lambda origin: cors.to_dict(origin) if origin else {}) if cors else None,
        body_idle_s=args.body_idle_seconds,
        body_total_s=args.body_total_seconds,
        authorizer=JwtAuthorizer(args.jwt_issuer, args.jwt_audience.split(",")) if args.jwt_issuer else None,
    )
    app: Any = counting_open_requests(asgi, SharedCount(args.requests_fd)) if args.requests_fd is not None else asgi
    exit_with_parent(lambda: os.kill(os.getpid(), signal.SIGTERM))  # uvicorn stops gracefully on it

    def drain(signum: int, _frame: object) -> None:  # serve is stopping: no new jobs, polls still answered
        asgi.draining = True

    signal.signal(signal.SIGUSR1, drain)  # uvicorn captures SIGINT and SIGTERM only
    # uvicorn re-raises the signal it stopped on once it has shut down (uvicorn >= 0.29); with the
    # default handler that kills this process before ``finally`` closes the pool, leaving its
    # zygote's directory behind in /tmp. Exiting through SystemExit runs ``finally``.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_cleanly)
    JsonErrorH11Protocol.header_timeout_s = args.body_idle_seconds  # headers that stall: 408, as a stalled body
    try:
        # h11's limit on a request's line and headers (uvicorn's default, said here): over it, or for anything h11
        # cannot parse, the protocol answers 400 before any app sees the request, in the API's error shape
        # (JsonErrorH11Protocol); the body's limits (size, a stalled body) are LambdaAsgi's.
        config = uvicorn.Config(
            app,
            log_level="warning",
            timeout_graceful_shutdown=5,
            timeout_keep_alive=KEEP_ALIVE_S,
            backlog=2048,
            h11_max_incomplete_event_size=16 * 1024,
            # The caller is the TCP peer, as HTTP API's sourceIp is: no X-Forwarded-For or Forwarded header is
            # trusted (uvicorn's default trusts them from 127.0.0.1, and one client could rotate its way into
            # every admission share).
            proxy_headers=False,
            http=JsonErrorH11Protocol,
        )
        # The socket serve bound (its family read from it: uvicorn's own --fd would take it for a Unix socket, and
        # every client's address, the admission share's key, would be lost).
        uvicorn.Server(config).run(sockets=[socket.socket(fileno=args.fd)])
    finally:
        pool.close()


def _exit_cleanly(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    main()
