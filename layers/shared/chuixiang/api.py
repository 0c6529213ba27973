"""The public HTTP API, built on one Powertools resolver class or another.

``functions/api/app.py`` builds it on ``APIGatewayHttpResolver`` for Lambda;
``chuixiang serve`` builds the very same routes on ``HttpResolverLocal`` for
uvicorn. Validation errors, unknown jobs and upstream AWS trouble all become
JSON errors with a code - never a stack trace.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from functools import lru_cache
from typing import Annotated, Any, TypeVar

import boto3
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from botocore.exceptions import BotoCoreError, ClientError

from .errors import ErrorCode, message_for
from .job_status import JobStatus
from .models import CreateRecipeRequest, CreateRecipeResponse, JobDocument
from .observability import logger
from .settings import get_settings
from .stores.images import ImageStore
from .stores.jobs import JobStore, past_deadline, render
from .timeouts import STATE_MACHINE

R = TypeVar("R", bound=ApiGatewayResolver)
JOB_ID = re.compile(r"^[0-9a-f-]{8,64}$")
POLL_AFTER_MS = 3000


@lru_cache(maxsize=4)
def _sfn(endpoint: str | None) -> Any:
    return boto3.client("stepfunctions", endpoint_url=endpoint)


def error_response(status: int, code: str, reason: str | None = None, message: str | None = None) -> Response:
    body = {"error": {"code": code, "message": message or message_for(code), "reason": reason}}
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON,
                    body=json.dumps(body, ensure_ascii=False))


def _reason(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts) or "invalid request"


def build_app(resolver_cls: type[R], **kwargs: Any) -> R:
    app = resolver_cls(enable_validation=True, **kwargs)

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response:
        if app.current_event.path.rstrip("/").endswith("/recipes"):
            return error_response(400, ErrorCode.INVALID_DISH, _reason(exc))
        return error_response(400, "BAD_REQUEST", _reason(exc), "请求格式不对。")

    @app.exception_handler([ClientError, BotoCoreError])
    def _aws_down(exc: Exception) -> Response:
        logger.exception("AWS call failed")
        return error_response(503, ErrorCode.INTERNAL, "service dependency unavailable")

    @app.not_found
    def _no_route(exc: Exception) -> Response:
        return error_response(404, "NOT_FOUND", "no such route", "没有这个接口。")

    @app.post("/recipes")
    def create_recipe(
        request: Annotated[CreateRecipeRequest, Body()],
        idempotency_key: Annotated[str | None, Header(alias="idempotency-key", max_length=128)] = None,
    ) -> Response[Any]:
        try:
            if idempotency_key:
                created = start_job_once({"dish": request.dish, "idempotencyKey": idempotency_key},
                                         getattr(app, "lambda_context", None))
            else:
                created = start_job({"dish": request.dish})
        except JobStartError:
            return error_response(503, ErrorCode.INTERNAL, "could not start the job")
        except IdempotencyAlreadyInProgressError:
            return error_response(409, "REQUEST_IN_PROGRESS", "the same Idempotency-Key is being processed",
                                  "上一次提交还在处理中，请稍后再查。")
        body = CreateRecipeResponse.model_validate(created)
        return Response(status_code=202, content_type=content_types.APPLICATION_JSON,
                        body=body.model_dump_json(), headers={"Location": f"/recipes/{body.jobId}"})

    @app.get("/recipes/<jobId>")
    def get_recipe(jobId: Annotated[str, Path()]) -> Response[Any]:  # noqa: N803
        if not JOB_ID.match(jobId):
            return error_response(404, "JOB_NOT_FOUND", "no such job", "没有找到这个任务。")
        doc = load_job_document(jobId)
        if doc is None:
            return error_response(404, "JOB_NOT_FOUND", "no such job", "没有找到这个任务。")
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON,
                        body=doc.model_dump_json(), headers={"Cache-Control": "no-store"})

    return app


class JobStartError(Exception):
    """StartExecution failed; the job was marked FAILED and the caller gets a 503."""


def start_job(job: dict[str, str]) -> dict[str, Any]:
    """Create the job item, then start its execution (named after the job: one execution per job)."""
    settings = get_settings()
    store = JobStore(settings)
    job_id = str(uuid.uuid4())
    logger.append_keys(jobId=job_id)
    store.create(job_id, job["dish"])
    try:
        _sfn(os.environ.get("AWS_ENDPOINT_URL")).start_execution(
            stateMachineArn=settings.state_machine_arn,
            name=job_id,
            input=json.dumps({"jobId": job_id, "dish": job["dish"]}, ensure_ascii=False),
        )
    except (ClientError, BotoCoreError) as exc:
        logger.exception("StartExecution failed")
        store.fail(job_id, ErrorCode.INTERNAL, f"StartExecution failed: {exc}")
        raise JobStartError(str(exc)) from exc
    return CreateRecipeResponse(jobId=job_id, status=JobStatus.PENDING, pollAfterMs=POLL_AFTER_MS).model_dump()


@lru_cache(maxsize=4)
def _idempotency_store(table: str, endpoint: str | None) -> DynamoDBPersistenceLayer:
    """Idempotency records share the jobs table (``pk = <function>#<hash>``, same TTL attribute)."""
    return DynamoDBPersistenceLayer(table_name=table, key_attr="pk", expiry_attr="expiresAt",
                                    boto3_client=boto3.client("dynamodb", endpoint_url=endpoint))


def start_job_once(job: dict[str, str], lambda_context: Any = None) -> dict[str, Any]:
    """A retried POST with the same ``Idempotency-Key`` and dish gets the same job, for a day.

    A double tap or a client retry after a lost answer must not start a second 90 s generation.
    """
    settings = get_settings()
    store = _idempotency_store(settings.jobs_table, os.environ.get("AWS_ENDPOINT_URL"))
    config = IdempotencyConfig(expires_after_seconds=24 * 3600)
    if hasattr(lambda_context, "get_remaining_time_in_millis"):  # absent under `chuixiang serve`
        config.register_lambda_context(lambda_context)
    once = idempotent_function(data_keyword_argument="job", persistence_store=store, config=config)(start_job)
    result: dict[str, Any] = once(job=job)
    return result


def load_job_document(job_id: str) -> JobDocument | None:
    """Read a job; one found past its deadline and still not terminal is failed first."""
    settings = get_settings()
    store = JobStore(settings)
    item = store.get(job_id)
    if item is None:
        return None
    if past_deadline(item, STATE_MACHINE.of(settings)):
        store.fail(job_id, ErrorCode.JOB_TIMED_OUT, "reconciled by GET after deadlineAt")
        item = store.get(job_id) or item
    url = ImageStore(settings).url(item["imageKey"]) if item.get("imageKey") else None
    return render(item, url)
