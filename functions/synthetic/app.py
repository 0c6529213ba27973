"""Synthetic job: one dish through the public API on a schedule, as a client cooks it (``chuixiang.synthetic``)."""

import httpx
from aws_lambda_powertools.utilities.parser import event_parser
from aws_lambda_powertools.utilities.typing import LambdaContext

from chuixiang.observability import logger, metrics
from chuixiang.settings import get_settings
from chuixiang.stores.secrets import synthetic_token
from chuixiang.stores.synthetic_lease import SyntheticLease
from chuixiang.stores.table import jobs_table
from chuixiang.synthetic import REQUEST_TIMEOUT_S, SyntheticEvent, SyntheticResult, run_alone, run_synthetic


@logger.inject_lambda_context
@metrics.log_metrics
@event_parser(model=SyntheticEvent)
def lambda_handler(event: SyntheticEvent, context: LambdaContext) -> dict:
    settings = get_settings()
    lease = SyntheticLease(jobs_table(settings))
    remaining = context.get_remaining_time_in_millis

    def run() -> SyntheticResult:
        token = synthetic_token(settings)
        headers = {"User-Agent": "chuixiang-synthetic", **({"Authorization": f"Bearer {token}"} if token else {})}
        with httpx.Client(base_url=settings.api_url, headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
            return run_synthetic(event, client, remaining)

    return run_alone(lease, context.aws_request_id, remaining, run).model_dump()
