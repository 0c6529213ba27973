"""The public HTTP API: a gate for what must never reach the routes, then the Powertools routes.

``functions/api/app.py`` runs :func:`handle` on ``APIGatewayHttpResolver``;
``chuixiang serve`` runs the very same function behind an ASGI adapter that
turns each request into the HTTP API event API Gateway would send. Every refused
request gets ``{"error": {"code", "message", "reason"}}`` - never a stack trace
or a plain-text 500. The OpenAPI document is generated from the routes.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Annotated, Any, TypeVar

import boto3
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Body, Header, Path
from aws_lambda_powertools.event_handler.openapi.types import (
    OpenAPIResponse,
    OpenAPIResponseContentModel,
    OpenAPIResponseContentSchema,
)
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from botocore.exceptions import BotoCoreError, ClientError

from . import job_start
from .api_gate import (
    IDEMPOTENCY_KEY,
    cors_config,
    error_body,
)
from .errors import ErrorCode, HttpErrorCode
from .job_start import AdmissionRefused, JobStartError, admitted_as, caller_of, start_job, start_job_once
from .job_view import load_job_document
from .observability import caller_hash, dimensioned_metric, logger
from .schemas import CreateRecipeRequest, CreateRecipeResponse, ErrorBody, JobDocument
from .settings import get_settings
from .stores.images import ImageStore
from .stores.images import forget_clients as forget_image_clients
from .stores.jobs import JobStore
from .stores.table import forget_clients as forget_table_clients

R = TypeVar("R", bound=ApiGatewayResolver)
JOB_ID = re.compile(r"^[0-9a-f-]{8,64}$")
TITLE, VERSION = "Chuixiang API", "1.0.0"
DESCRIPTION = (
    "Name a dish: `POST /recipes` starts a job at once (202) and `GET /recipes/{jobId}` polls it every "
    "`pollAfterMs` until it is SUCCEEDED or FAILED, at the latest at its `deadlineAt`. While the model writes "
    "(~90 s) the job carries `progress` and the finished part of the recipe (`partial`). Every error has the "
    'shape `{"error": {"code", "message", "reason"}}`; `message` is for the user, `code` for the client.'
)


def error_response(
    status: int, code: str, reason: str | None = None, message: str | None = None, headers: dict[str, str] | None = None
) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=error_body(code, reason, message),
        headers=headers,
    )


def _reason(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts) or "invalid request"


# --- the routes -------------------------------------------------------------------------------------

_Content = dict[str, OpenAPIResponseContentModel | OpenAPIResponseContentSchema]
_ERROR: _Content = {"application/json": {"model": ErrorBody}}
POST_RESPONSES: dict[int, OpenAPIResponse] = {
    202: {
        "description": "Job accepted (or joined): poll `Location` every `pollAfterMs` until `deadlineAt`",
        "content": {"application/json": {"model": CreateRecipeResponse}},
    },
    400: {
        "description": "INVALID_DISH (the body is not a JSON object with a valid `dish`) or INVALID_IDEMPOTENCY_KEY",
        "content": _ERROR,
    },
    405: {"description": "METHOD_NOT_ALLOWED (see the Allow header)", "content": _ERROR},
    409: {
        "description": "REQUEST_IN_PROGRESS: the same Idempotency-Key is being processed; retry shortly",
        "content": _ERROR,
    },
    413: {"description": "PAYLOAD_TOO_LARGE: the body is over 8 KiB", "content": _ERROR},
    415: {
        "description": "UNSUPPORTED_MEDIA_TYPE: the body must be application/json, in UTF-8 (a charset other than "
        "utf-8 is refused)",
        "content": _ERROR,
    },
    422: {"description": "IDEMPOTENCY_KEY_REUSED: this Idempotency-Key was used for another dish", "content": _ERROR},
    429: {
        "description": "TOO_MANY_JOBS: no more jobs can be taken now; retry after `Retry-After` seconds",
        "content": _ERROR,
    },
    503: {"description": "INTERNAL: a dependency is unavailable; retry later", "content": _ERROR},
}
GET_RESPONSES: dict[int, OpenAPIResponse] = {
    200: {"description": "The job document", "content": {"application/json": {"model": JobDocument}}},
    404: {"description": "JOB_NOT_FOUND", "content": _ERROR},
    405: {"description": "METHOD_NOT_ALLOWED (see the Allow header)", "content": _ERROR},
    503: {"description": "INTERNAL: a dependency is unavailable; retry later", "content": _ERROR},
}


def _start(job: dict[str, str], idempotency_key: str | None, lambda_context: Any) -> dict[str, Any] | Response[Any]:
    """Start (or join) the job; the error answer when it cannot be."""
    try:
        if idempotency_key:
            return start_job_once({**job, "idempotencyKey": idempotency_key}, lambda_context)
        return start_job(job)
    except JobStartError:
        return error_response(503, ErrorCode.INTERNAL, "could not start the job")
    except AdmissionRefused as busy:
        return _refused(busy, job.get("admittedAs", ""))
    except IdempotencyAlreadyInProgressError:
        return error_response(409, HttpErrorCode.REQUEST_IN_PROGRESS, "the same Idempotency-Key is being processed")
    except IdempotencyValidationError:
        return error_response(
            422, HttpErrorCode.IDEMPOTENCY_KEY_REUSED, "this Idempotency-Key was first used with another dish"
        )


def _refused(busy: AdmissionRefused, admitted_as: str) -> Response[Any]:
    """The 429 of a request admission turned away, with when to come back and why."""
    seconds = str(math.ceil(busy.retry_after_s))
    # Clients turned away: the admission's saturation, as the on-call sees it (a metric and a line).
    dimensioned_metric("JobsRejected", MetricUnit.Count, 1, Reason=busy.reason)
    logger.info(
        "job refused",
        extra={"reason": busy.reason, "retryAfterS": int(seconds), "callerHash": caller_hash(admitted_as)},
    )
    return error_response(
        429,
        HttpErrorCode.TOO_MANY_JOBS,
        (
            f"this caller already has its share of jobs in flight; retry in {seconds} s"
            if busy.reason == "caller_limit"
            else f"all job slots are taken or owed to callers waiting before you; retry in {seconds} s"
        ),
        headers={"Retry-After": seconds},
    )


def _error_handlers(app: ApiGatewayResolver) -> None:
    """Every way a request can fail before or around a route, as the one error shape."""

    @app.exception_handler(RequestValidationError)
    def _invalid(exc: RequestValidationError) -> Response[Any]:
        if any(str(err.get("loc", ("",))[0]) == "header" for err in exc.errors()):
            return error_response(400, HttpErrorCode.INVALID_IDEMPOTENCY_KEY, _reason(exc))
        if app.current_event.path.rstrip("/").endswith("/recipes"):
            return error_response(400, ErrorCode.INVALID_DISH, _reason(exc))
        return error_response(400, HttpErrorCode.BAD_REQUEST, _reason(exc))

    @app.exception_handler(RequestUnsupportedContentType)
    def _not_json(exc: RequestUnsupportedContentType) -> Response[Any]:
        return error_response(415, HttpErrorCode.UNSUPPORTED_MEDIA_TYPE, "the body must be application/json")

    @app.exception_handler([ClientError, BotoCoreError])
    def _aws_down(exc: Exception) -> Response[Any]:
        logger.exception("AWS call failed")
        return error_response(503, ErrorCode.INTERNAL, "service dependency unavailable")

    @app.not_found
    def _no_route(exc: Exception) -> Response[Any]:
        return error_response(404, HttpErrorCode.NOT_FOUND, "no such route")


def build_app(resolver_cls: type[R], *, swagger: bool = False, **kwargs: Any) -> R:
    kwargs.setdefault("cors", cors_config())
    app = resolver_cls(enable_validation=True, **kwargs)
    _error_handlers(app)

    @app.post(
        "/recipes",
        summary="Start (or join) the job that writes a dish's recipe and draws it",
        responses=POST_RESPONSES,
        tags=["recipes"],
    )
    def create_recipe(
        request: Annotated[CreateRecipeRequest, Body()],
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="idempotency-key",
                pattern=IDEMPOTENCY_KEY.pattern,  # the gate enforces it; this documents it
                description="Same key and dish within 24 h: the same job. Same key, other dish: 422.",
            ),
        ] = None,
    ) -> Response[Any]:
        event = app.current_event.raw_event
        job = {"dish": request.dish, "caller": caller_of(event), "admittedAs": admitted_as(event)}
        created = _start(job, idempotency_key, getattr(app, "lambda_context", None))
        if isinstance(created, Response):
            return created
        body = CreateRecipeResponse.model_validate(created)
        logger.info("job started", extra={"jobId": body.jobId, "callerHash": caller_hash(job["admittedAs"])})
        return Response(
            status_code=202,
            content_type=content_types.APPLICATION_JSON,
            body=body.model_dump_json(),
            headers={"Location": f"/recipes/{body.jobId}"},
        )

    @app.get("/recipes/<jobId>", summary="Poll a job", responses=GET_RESPONSES, tags=["recipes"])
    def get_recipe(jobId: Annotated[str, Path()]) -> Response[Any]:  # noqa: N803
        if not JOB_ID.match(jobId):
            return error_response(404, HttpErrorCode.JOB_NOT_FOUND, "no such job")
        doc = load_job_document(jobId, caller_of(app.current_event.raw_event))
        if doc is None:
            return error_response(404, HttpErrorCode.JOB_NOT_FOUND, "no such job")
        return Response(
            status_code=200,
            content_type=content_types.APPLICATION_JSON,
            body=doc.model_dump_json(),
            headers={"Cache-Control": "no-store"},
        )

    @app.get("/openapi.json", summary="This API's OpenAPI 3 document", include_in_schema=False)
    def openapi() -> Response[Any]:
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=openapi_json(app))

    if swagger:
        app.enable_swagger(path="/swagger", title=TITLE, version=VERSION)
    return app


def openapi_json(app: ApiGatewayResolver) -> str:
    """The OpenAPI document, generated from the routes (``docs/openapi.json`` is this, checked in)."""
    doc = json.loads(app.get_openapi_json_schema(title=TITLE, version=VERSION, description=DESCRIPTION))
    # Powertools documents its own 422 validation answer on every route; this API answers 400 instead.
    for operations in doc["paths"].values():
        for operation in operations.values():
            if operation["responses"].get("422", {}).get("description") == "Validation Error":
                del operation["responses"]["422"]
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        doc["components"]["schemas"].pop(unused, None)
    return json.dumps(doc, ensure_ascii=False, indent=2)


def forget_clients() -> None:
    """After a SnapStart restore: the snapshot's AWS connections and credentials are stale (and shared by
    every sandbox restored from it), so each client is built again on first use."""
    forget_table_clients()
    forget_image_clients()
    job_start.forget_clients()
    boto3.DEFAULT_SESSION = None  # it keeps the credentials it resolved: a new one resolves them again


def mark_release() -> None:
    """The dashboard's deploy marker: ``Release`` by ``Version``, once per init of the api function. Under SnapStart
    the init runs when a version is published (the snapshot), so a release is one point on the day it shipped;
    without it, one per cold start of the version, which shows when it took the traffic."""
    version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
    dimensioned_metric("Release", MetricUnit.Count, 1, Version=version)


def warm_up(app: ApiGatewayResolver) -> None:
    """Create the AWS clients now, in the init phase, not in the first requests: created lazily by
    many requests at once, each would build its own (tens of ms of CPU apiece). Likewise each
    route's request model: Powertools builds it (~10 ms for our three) on a route's first call."""
    for route in [*app._static_routes, *app._dynamic_routes]:  # no public hook; pinned Powertools
        _ = route.dependant, route.body_field
    settings = get_settings()
    JobStore(settings)
    ImageStore(settings)
    job_start.warm_up()
