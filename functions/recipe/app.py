"""Recipe stage: stream the model inside min(total limit, Lambda time left, job deadline)."""

from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from chuixiang import steps
from chuixiang.observability import logger, metrics
from chuixiang.schemas import RecipeEvent

steps.warm_up(model=True)


@logger.inject_lambda_context(correlation_id_path="jobId")
@metrics.log_metrics
@event_parser(model=RecipeEvent)
def lambda_handler(event: RecipeEvent, context: LambdaContext) -> dict:
    return steps.run_recipe(event, context.get_remaining_time_in_millis).model_dump()
