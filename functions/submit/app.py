"""Submit stage: validate the dish, mark the job RUNNING, fix its deadline, check the cache."""

from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from chuixiang import steps
from chuixiang.observability import logger, metrics
from chuixiang.schemas import SubmitEvent

steps.warm_up()


@logger.inject_lambda_context(correlation_id_path="jobId")
@metrics.log_metrics
@event_parser(model=SubmitEvent)
def lambda_handler(event: SubmitEvent, context: LambdaContext) -> dict:
    return steps.submit(event).model_dump()
