"""The public HTTP API: a gate for what must never reach the routes, then the Powertools routes.

``functions/api/app.py`` runs :func:`handle` on ``APIGatewayHttpResolver``;
``chuixiang serve`` runs the very same function behind an ASGI adapter that
turns each request into the HTTP API event API Gateway would send. Every refused
request gets ``{"error": {"code", "message", "reason"}}`` - never a stack trace
or a plain-text 500. The OpenAPI document is generated from the routes.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
from functools import lru_cache
from typing import Annotated, Any, TypeVar

import boto3
from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, CORSConfig
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
from .errors import ErrorCode, HttpErrorCode, message_for
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
#: Printable ASCII, as the IETF Idempotency-Key draft and Stripe expect (a UUID fits with room to spare).
IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,128}$")
#: Deepest JSON body the gate parses (a dish request is one level deep).
MAX_JSON_DEPTH = 32
#: Largest POST body the gate reads: a dish request is a few dozen bytes (400 characters at most, 4 bytes each,
#: escaped). A larger one is refused before it is decoded or parsed, so its width (keys, items) costs nothing:
#: a hostile body of any size the function can receive (6 MB) is answered at once.
MAX_POST_BODY_BYTES = 8 * 1024
TITLE, VERSION = "Chuixiang API", "1.0.0"
DESCRIPTION = (
    "Name a dish: `POST /recipes` starts a job at once (202) and `GET /recipes/{jobId}` polls it every "
    "`pollAfterMs` until it is SUCCEEDED or FAILED, at the latest at its `deadlineAt`. While the model writes "
    "(~90 s) the job carries `progress` and the finished part of the recipe (`partial`). Every error has the "
    'shape `{"error": {"code", "message", "reason"}}`; `message` is for the user, `code` for the client.'
)

#: Every route and its methods: the gate answers 405 for another method on a known path.
ROUTES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"^/recipes/?$"), ("POST",)),
    (re.compile(r"^/recipes/[^/]+/?$"), ("GET",)),
    (re.compile(r"^/openapi\.json$"), ("GET",)),
    (re.compile(r"^/swagger/?$"), ("GET",)),
)


def error_body(code: str, reason: str | None = None, message: str | None = None) -> str:
    """The one error shape of every refused request: ``{"error": {"code", "message", "reason"}}``."""
    return json.dumps(
        {"error": {"code": code, "message": message or message_for(code), "reason": reason}}, ensure_ascii=False
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


# --- the gate: what the resolver must never see --------------------------------------------------


def _proxy_error(status: int, code: str, reason: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": error_body(code, reason),
        "isBase64Encoded": False,
    }


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of parsed JSON, iteratively (no recursion to exhaust), stopping past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def media_type(header: str | None) -> str:
    """The media type of a ``Content-Type`` header, without parameters, lower-cased (RFC 9110: media types
    are case-insensitive); empty when there is none."""
    return (header or "").split(";")[0].strip().lower()


def gate(event: dict[str, Any]) -> dict[str, Any] | None:
    """Refuse, in the one error shape, what would otherwise reach the resolver as an exception:
    an unknown method on a known path (405), a POST body that is not JSON (415), not UTF-8 or nested
    absurdly deep (400), a malformed ``Idempotency-Key`` (400). None: let the resolver route it."""
    http = (event.get("requestContext") or {}).get("http") or {}
    method = str(http.get("method") or event.get("httpMethod") or "GET")  # case-sensitive (RFC 9110 9.1)
    path = str(event.get("rawPath") or http.get("path") or event.get("path") or "/")
    allowed = next((methods for pattern, methods in ROUTES if pattern.match(path)), None)
    if allowed is None:
        return None  # the resolver's 404
    if method == "OPTIONS" and cors_config() is not None:
        return None  # a CORS preflight: the resolver answers it from its CORSConfig, never with 405
    if method not in allowed and not (method == "HEAD" and "GET" in allowed):
        return _proxy_error(
            405,
            HttpErrorCode.METHOD_NOT_ALLOWED,
            f"{method} {path}: allowed {', '.join(allowed)}",
            {"Allow": ", ".join(allowed)},
        )
    if method != "POST":
        return None
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    content_type = media_type(headers.get("content-type"))
    if content_type != "application/json":
        # A body without it is what a page on any origin can send with no preflight (a no-cors fetch, a
        # beacon, a form): refusing it is what keeps other sites from starting jobs with a visitor's browser.
        said = f"content-type {content_type!r}" if content_type else "no content-type"
        return _proxy_error(
            415, HttpErrorCode.UNSUPPORTED_MEDIA_TYPE, f"{said}: the body must be sent as application/json"
        )
    key = headers.get("idempotency-key")
    if key is not None and not IDEMPOTENCY_KEY.match(key):
        return _proxy_error(
            400, HttpErrorCode.INVALID_IDEMPOTENCY_KEY, "Idempotency-Key must be 1-128 printable ASCII characters"
        )
    return _body_refusal(event)


def _body_refusal(event: dict[str, Any]) -> dict[str, Any] | None:
    """A POST body too large (413, before it is decoded), not UTF-8, with a key named twice, a number Python
    will not read, or nested absurdly deep (400); None: the resolver validates it."""
    raw = str(event.get("body") or "")
    if len(raw) > (MAX_POST_BODY_BYTES * 4 // 3 + 4 if event.get("isBase64Encoded") else MAX_POST_BODY_BYTES):
        return _too_large()
    try:
        body = base64.b64decode(raw, validate=True) if event.get("isBase64Encoded") else raw.encode()
        text = body.decode("utf-8")
    except (ValueError, UnicodeError):
        return _proxy_error(400, ErrorCode.INVALID_DISH, "the body is not UTF-8 text")
    if len(body) > MAX_POST_BODY_BYTES:
        return _too_large()
    try:
        parsed = json.loads(text, object_pairs_hook=_no_duplicate_keys) if text.strip() else None
    except DuplicateKey as exc:
        return _proxy_error(
            400,
            ErrorCode.INVALID_DISH,
            f"the body names {str(exc)!r} twice (RFC 8259 4: its meaning is undefined)"[:200],
        )
    except RecursionError:
        return _proxy_error(400, ErrorCode.INVALID_DISH, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    except json.JSONDecodeError:
        return None  # the resolver's validation explains where the JSON breaks
    except ValueError as exc:  # valid JSON Python refuses: an integer of more than 4300 digits
        return _proxy_error(400, ErrorCode.INVALID_DISH, f"the body holds a number Python will not read: {exc}"[:200])
    if _depth(parsed, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        return _proxy_error(400, ErrorCode.INVALID_DISH, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return None


class DuplicateKey(ValueError):
    """A JSON object that names one key twice: what it means is undefined (RFC 8259 4), so it is refused."""


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def _too_large() -> dict[str, Any]:
    return _proxy_error(
        413,
        HttpErrorCode.PAYLOAD_TOO_LARGE,
        f"a dish request is a few dozen bytes; this body is over {MAX_POST_BODY_BYTES}",
    )


def vary_on_origin(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer whose ``Access-Control-Allow-Origin`` echoes the request's origin differs by origin: say so
    (``Vary: Origin``), or a shared cache may hand one origin's answer to a page on another."""
    headers: dict[str, Any] = answer.get("headers") or {}
    if not any(str(k).lower() == "access-control-allow-origin" for k in headers):
        return answer
    vary = [str(v) for k, v in headers.items() if str(k).lower() == "vary"]
    kept = {k: v for k, v in headers.items() if str(k).lower() != "vary"}
    values = [v.strip() for v in ",".join(vary).split(",") if v.strip()]
    if "origin" not in {v.lower() for v in values}:
        values.append("Origin")
    return {**answer, "headers": {**kept, "Vary": ", ".join(values)}}


def handle(app: ApiGatewayResolver, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The api function: the gate, then the routes; anything unforeseen is a JSON 500, never a trace.
    ``HEAD`` is answered as ``GET`` without a body (the same status and headers)."""
    refused = gate(event)
    if refused is not None:  # answered before the resolver: its CORS headers too, or a browser sees no reason
        origin = {str(k).lower(): v for k, v in (event.get("headers") or {}).items()}.get("origin")
        cors = cors_config()
        return vary_on_origin(
            {**refused, "headers": {**refused.get("headers", {}), **(cors.to_dict(origin) if cors else {})}}
        )
    event = _with_media_type_lowered(event)
    http = (event.get("requestContext") or {}).get("http") or {}
    head = str(http.get("method", "")).upper() == "HEAD"
    if head:
        event = {**event, "requestContext": {**event["requestContext"], "http": {**http, "method": "GET"}}}
    try:
        answer = vary_on_origin(app.resolve(event, context))
        return {**answer, "body": "", "isBase64Encoded": False} if head else answer
    except Exception:  # the last line of defence: log it, answer in the one error shape
        logger.exception("unhandled error in the API")
        return _proxy_error(500, ErrorCode.INTERNAL, "unexpected error")


def _with_media_type_lowered(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its ``Content-Type`` as the resolver compares it (``Application/Json`` is JSON too)."""
    headers = event.get("headers") or {}
    name = next((k for k in headers if str(k).lower() == "content-type"), None)
    if name is None:
        return event
    value = str(headers[name])
    lowered = media_type(value) + value[len(value.split(";")[0]) :]
    return {**event, "headers": {**headers, name: lowered}}


# --- the routes -------------------------------------------------------------------------------------

_Content = dict[str, OpenAPIResponseContentModel | OpenAPIResponseContentSchema]
_ERROR: _Content = {"application/json": {"model": ErrorBody}}
POST_RESPONSES: dict[int, OpenAPIResponse] = {
    202: {
        "description": "Job accepted (or joined): poll `Location` every `pollAfterMs` until `deadlineAt`",
        "content": {"application/json": {"model": CreateRecipeResponse}},
    },
    400: {"description": "INVALID_DISH or INVALID_IDEMPOTENCY_KEY", "content": _ERROR},
    405: {"description": "METHOD_NOT_ALLOWED (see the Allow header)", "content": _ERROR},
    409: {
        "description": "REQUEST_IN_PROGRESS: the same Idempotency-Key is being processed; retry shortly",
        "content": _ERROR,
    },
    413: {"description": "PAYLOAD_TOO_LARGE: the body is over 8 KiB", "content": _ERROR},
    415: {"description": "UNSUPPORTED_MEDIA_TYPE: the body must be application/json", "content": _ERROR},
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


@lru_cache(maxsize=4)
def _cors_for(origins: str) -> CORSConfig | None:
    allowed = [o.strip() for o in origins.split(",") if o.strip()]
    if not allowed:
        return None
    return CORSConfig(
        allow_origin=allowed[0],
        extra_origins=allowed[1:],
        max_age=600,
        allow_headers=["content-type", "idempotency-key", "authorization"],
        expose_headers=["location", "retry-after"],
    )


def cors_config(origins: str | None = None) -> CORSConfig | None:
    """The browser origins ``CorsAllowOrigins`` names (comma-separated; empty: no CORS). The function answers
    preflights itself, so an ``ANY`` route or the JWT authorizer can never turn one into a 405 or a 401."""
    return _cors_for(origins if origins is not None else os.environ.get("CORS_ALLOW_ORIGINS", ""))


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
