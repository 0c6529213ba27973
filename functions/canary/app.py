"""Canary: the recipe request to each candidate model, on a schedule, as per-model metrics."""

from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from chuixiang import steps
from chuixiang.canary import run_canary
from chuixiang.observability import logger, metrics
from chuixiang.schemas import CanaryEvent

steps.warm_up(table=False, model=True)


@logger.inject_lambda_context
@metrics.log_metrics
@event_parser(model=CanaryEvent)
def lambda_handler(event: CanaryEvent, context: LambdaContext) -> dict:
    return run_canary(event, context.get_remaining_time_in_millis).model_dump()
