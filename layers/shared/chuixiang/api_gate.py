"""The API's gate: what a request must never bring to the routes is refused here, in the one error shape.

:func:`handle` is the api function: the gate (an unknown method, a body that is not JSON, too large, not
UTF-8, with a key named twice or nested absurdly deep, a malformed ``Idempotency-Key``), CORS for the
answers the routes never see, then the resolver; anything unforeseen is a JSON 500, never a trace.
"""

from __future__ import annotations

import base64
import json
import os
import re
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import ApiGatewayResolver, CORSConfig

from .errors import ErrorCode, HttpErrorCode, message_for
from .observability import logger

#: Printable ASCII, as the IETF Idempotency-Key draft and Stripe expect (a UUID fits with room to spare).
IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,128}$")


#: Deepest JSON body the gate parses (a dish request is one level deep).
MAX_JSON_DEPTH = 32


#: Largest POST body the gate reads: a dish request is a few dozen bytes (400 characters at most, 4 bytes each,
#: escaped). A larger one is refused before it is decoded or parsed, so its width (keys, items) costs nothing:
#: a hostile body of any size the function can receive (6 MB) is answered at once.
MAX_POST_BODY_BYTES = 8 * 1024


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


def proxy_error(status: int, code: str, reason: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": error_body(code, reason),
        "isBase64Encoded": False,
    }


def media_type(header: str | None) -> str:
    """The media type of a ``Content-Type`` header, without parameters, lower-cased (RFC 9110: media types
    are case-insensitive); empty when there is none."""
    return (header or "").split(";")[0].strip().lower()


#: The names a ``charset`` parameter may give UTF-8 (case-insensitive: RFC 9110 8.3.2).
UTF8_NAMES = ("utf-8", "utf8")


def charset_of(header: str | None) -> str | None:
    """The ``charset`` parameter of a ``Content-Type`` header, lower-cased and unquoted (None: not said)."""
    for param in (header or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return None


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
        return proxy_error(
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
        return proxy_error(
            415, HttpErrorCode.UNSUPPORTED_MEDIA_TYPE, f"{said}: the body must be sent as application/json"
        )
    charset = charset_of(headers.get("content-type"))
    if charset is not None and charset not in UTF8_NAMES:
        # JSON exchanged between systems is UTF-8 (RFC 8259 8.1); a body declared otherwise is not read as if UTF-8.
        return proxy_error(
            415, HttpErrorCode.UNSUPPORTED_MEDIA_TYPE, f"charset {charset!r}: the body must be UTF-8 JSON"[:200]
        )
    key = headers.get("idempotency-key")
    if key is not None and not IDEMPOTENCY_KEY.match(key):
        return proxy_error(
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
        return proxy_error(400, ErrorCode.INVALID_DISH, "the body is not UTF-8 text")
    if len(body) > MAX_POST_BODY_BYTES:
        return _too_large()
    try:
        parsed = json.loads(text, object_pairs_hook=_no_duplicate_keys) if text.strip() else None
    except DuplicateKey as exc:
        return proxy_error(
            400,
            ErrorCode.INVALID_DISH,
            f"the body names {str(exc)!r} twice (RFC 8259 4: its meaning is undefined)"[:200],
        )
    except RecursionError:
        return proxy_error(400, ErrorCode.INVALID_DISH, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    except json.JSONDecodeError:
        return None  # the resolver's validation explains where the JSON breaks
    except ValueError as exc:  # valid JSON Python refuses: an integer of more than 4300 digits
        return proxy_error(400, ErrorCode.INVALID_DISH, f"the body holds a number Python will not read: {exc}"[:200])
    if _depth(parsed, MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        return proxy_error(400, ErrorCode.INVALID_DISH, f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    if parsed is not None and not isinstance(parsed, dict):
        kind = "an array" if isinstance(parsed, list) else f"a {type(parsed).__name__}"
        return proxy_error(400, ErrorCode.INVALID_DISH, f'the body must be a JSON object {{"dish": …}}, not {kind}')
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
    return proxy_error(
        413,
        HttpErrorCode.PAYLOAD_TOO_LARGE,
        f"a dish request is a few dozen bytes; this body is over {MAX_POST_BODY_BYTES}",
    )


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


def _with_media_type_lowered(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its ``Content-Type`` as the resolver compares it (``Application/Json`` is JSON too)."""
    headers = event.get("headers") or {}
    name = next((k for k in headers if str(k).lower() == "content-type"), None)
    if name is None:
        return event
    value = str(headers[name])
    lowered = media_type(value) + value[len(value.split(";")[0]) :]
    return {**event, "headers": {**headers, name: lowered}}


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
        return proxy_error(500, ErrorCode.INTERNAL, "unexpected error")
