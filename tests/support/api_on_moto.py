"""The api function's app on an in-process moto table, bucket and state machine (executions recorded, not run)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import boto3
import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from moto import mock_aws
from moto.core.config import default_user_config
from stack_template import Template

from chuixiang import api, job_start
from chuixiang.settings import get_settings

TEMPLATE = Template()
#: The template's default CorsAllowOrigins: a preflight (OPTIONS) on a known path is answered, not refused.
CORS_ORIGINS = TEMPLATE.parameters["CorsAllowOrigins"]


@contextlib.contextmanager
def api_on_moto(max_jobs: int, name: str) -> Iterator[APIGatewayHttpResolver]:
    """The api function's app on an in-process moto table and state machine."""
    patch = pytest.MonkeyPatch()
    patch.delenv("AWS_ENDPOINT_URL", raising=False)
    # Whatever an earlier test left in this process's environment (a local cloud makes the process look like
    # its api function, with that stack's parameters): only what is set below, and the settings' defaults.
    for key in TEMPLATE.function_by_dir("api").env:
        patch.delenv(key, raising=False)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "JOBS_TABLE": name,
        "IMAGES_BUCKET": name,
        "ADMISSION_SLOTS": str(max_jobs),
        "RECIPE_SECTIONS": "whole",  # one stream a job: max_jobs jobs
        "CORS_ALLOW_ORIGINS": CORS_ORIGINS,
    }.items():  # as deployed, whatever ran before
        patch.setenv(key, value)
    patch.setitem(default_user_config, "stepfunctions", {"execute_state_machine": False})
    with mock_aws():
        boto3.resource("dynamodb").create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        boto3.client("s3").create_bucket(Bucket=name)
        arn = boto3.client("stepfunctions").create_state_machine(
            name=name,
            definition='{"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}}',
            roleArn="arn:aws:iam::123456789012:role/fuzz",
        )["stateMachineArn"]
        patch.setenv("STATE_MACHINE_ARN", arn)
        get_settings.cache_clear()
        job_start.forget_clients()
        yield api.build_app(APIGatewayHttpResolver)
    get_settings.cache_clear()
    job_start.forget_clients()
    patch.undo()
