"""EventBridge target: an execution that ended TIMED_OUT / ABORTED / FAILED fails its job.

The state machine's own states cannot run after the execution timed out or was
aborted, so this is what guarantees a job never stays RUNNING.
"""

import json

from aws_lambda_powertools.utilities.data_classes import EventBridgeEvent, event_source
from aws_lambda_powertools.utilities.typing import LambdaContext

from chuixiang import steps
from chuixiang.observability import logger, metrics

steps.warm_up()


@logger.inject_lambda_context(correlation_id_path="detail.name")
@metrics.log_metrics
@event_source(data_class=EventBridgeEvent)
def lambda_handler(event: EventBridgeEvent, context: LambdaContext) -> dict:
    detail = event.detail
    job_id = json.loads(detail.get("input") or "{}").get("jobId") or detail["name"]
    changed = steps.reconcile(job_id, detail["status"])
    return {"jobId": job_id, "changed": changed}
