"""The api function behind uvicorn, in a process of its own (``chuixiang serve`` starts it).

API Gateway and the Lambdas it invokes do not share a CPU with Step Functions and
DynamoDB; locally, the moto server and the state machine interpreter run in the
``serve`` process, so the API gets its own process (and interpreter lock) here,
with the api function's environment, and serves requests through
:class:`~chuixiang_local.asgi.LambdaAsgi`.

    python -m chuixiang_local.api_server --port 3000 --function-name … --timeout 10 …
"""

from __future__ import annotations

import argparse
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--function-name", required=True)
    ap.add_argument("--function-arn", default="")
    ap.add_argument("--timeout", type=int, required=True)
    ap.add_argument("--memory", type=int, default=128)
    ap.add_argument("--jwt-issuer", default="", help="the template's JwtIssuer: check tokens as API Gateway would")
    ap.add_argument("--jwt-audience", default="", help="the template's JwtAudience (comma-separated)")
    args = ap.parse_args()

    import uvicorn
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

    from chuixiang.api import build_app, handle, warm_up

    from .asgi import LambdaAsgi
    from .jwt_authorizer import JwtAuthorizer

    def make_handler() -> Any:
        app = build_app(APIGatewayHttpResolver, swagger=True)
        return lambda event, context: handle(app, event, context)

    warm_up()
    asgi = LambdaAsgi(make_handler, function_name=args.function_name, timeout_s=args.timeout,
                      memory_mb=args.memory, arn=args.function_arn, workers=args.workers,
                      authorizer=JwtAuthorizer(args.jwt_issuer, args.jwt_audience.split(","))
                      if args.jwt_issuer else None)
    uvicorn.run(asgi, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=5,
                backlog=2048)


if __name__ == "__main__":
    main()
