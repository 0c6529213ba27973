"""API Gateway (HTTP API) entry point: the routes live in ``chuixiang.api``."""

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from chuixiang.api import build_app, forget_clients, mark_release, warm_up
from chuixiang.api_gate import handle
from chuixiang.observability import logger

app = build_app(APIGatewayHttpResolver)
warm_up(app)
mark_release()

try:  # the Lambda runtime ships it; SnapStart runs the hook in every sandbox restored from the snapshot
    from snapshot_restore_py import register_after_restore
except ImportError:  # a runtime without SnapStart hooks (local runs without the package)
    pass
else:
    register_after_restore(forget_clients)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def lambda_handler(event: dict, context: LambdaContext) -> dict:
    return handle(app, event, context)
