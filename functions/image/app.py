"""Image stage: draw the dish and store it; a failure degrades the job, never fails it."""

from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from chuixiang import steps
from chuixiang.observability import logger, metrics
from chuixiang.schemas import ImageEvent

steps.warm_up(model=True, bucket=True)


@logger.inject_lambda_context(correlation_id_path="jobId")
@metrics.log_metrics
@event_parser(model=ImageEvent)
def lambda_handler(event: ImageEvent, context: LambdaContext) -> dict:
    return steps.run_image(event, context.get_remaining_time_in_millis).model_dump()
