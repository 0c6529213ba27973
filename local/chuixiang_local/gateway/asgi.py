"""``chuixiang serve``: each HTTP request becomes an API Gateway HTTP API (v2) event for the api function.

API Gateway invokes the Lambda with one event per request and runs as many
invocations at once as there are requests; this ASGI app does the same on
loopback: it builds the v2 event (headers, query, body base64-encoded when it is
not UTF-8), hands it to the api function (see :mod:`chuixiang_local.gateway.api_server`:
one warm worker process per request in flight) from a thread, and sends back its
proxy response. Run by uvicorn, which stops cleanly on SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chuixiang.api_gate import error_body
from chuixiang.errors import HttpErrorCode
from chuixiang_local.gateway.jwt_authorizer import UNAUTHORIZED_BODY, UNAUTHORIZED_HEADERS, JwtAuthorizer

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

#: API Gateway's payload limit.
MAX_BODY_BYTES = 10 * 1024 * 1024
#: The request line and headers, as h11 bounds what it buffers (it lets a larger block through when it
#: arrives whole, so the app checks the total too): over it, 431.
MAX_HEADER_BYTES = 16 * 1024
#: A client that sends part of a body and stalls is cut after this long between two of its reads (408).
BODY_IDLE_S = 10.0
#: ...and one that drips it, a byte just inside the idle limit each time, after this long in all (408): HTTP
#: API's integration timeout, 30 s, after which AWS would not be waiting for the function any more.
BODY_TOTAL_S = 30.0
#: Lambda's limit on a synchronous invocation's request payload (6 MB: 6,291,456 bytes, the event as JSON).
#: The front door refuses an event over it as AWS does, before any function runs: HTTP API takes bodies up
#: to 10 MB, but Lambda refuses to be invoked with more than this.
LAMBDA_PAYLOAD_BYTES = 6 * 1024 * 1024
#: API Gateway's own answer to a request it cannot hand to its integration (its message shape, not the API's).
TOO_LARGE_BODY = json.dumps({"message": "Request Entity Too Large"}).encode()
#: What a request to start a job is told while ``serve`` drains: come back after the restart.
DRAIN_RETRY_AFTER_S = 10


class LambdaAsgi:
    """ASGI app handing every HTTP request, as an HTTP API event, to ``invoke`` (one invocation of the
    api function, in a process of its own) on one of ``workers`` threads; more requests wait for one."""

    def __init__(
        self,
        invoke: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        workers: int = 16,
        local_routes: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] | None = None,
        authorizer: JwtAuthorizer | None = None,
        body_idle_s: float = BODY_IDLE_S,
        body_total_s: float = BODY_TOTAL_S,
        cors: Callable[[str | None], dict[str, str]] | None = None,
    ) -> None:
        """``local_routes``: paths (and ``<path>.<ext>``, ``<path>/…``) answered by another handler than
        ``invoke``. ``cors``: the CORS headers for a request's ``Origin`` (none for an origin not allowed), put
        on the front door's own answers too (413, 408, 431, the drain's 503), or a page sees no reason."""
        self.invoke = invoke
        self.cors = cors
        self.local_routes = local_routes or {}
        self.authorizer = authorizer
        self.body_idle_s = body_idle_s
        self.body_total_s = body_total_s
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="api")
        #: Set when ``serve`` stops: new jobs are refused (503 + ``Retry-After``), polls still answered.
        self.draining = False

    def _handler_for(self, path: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        for prefix, handler in self.local_routes.items():
            if path == prefix or path.startswith((f"{prefix}.", f"{prefix}/")):
                return handler
        return self.invoke

    async def _body(self, receive: Receive, send: Send) -> bytes | None:
        """The request's whole body; None once a 408 (no bytes for ``body_idle_s``) or a 413 was answered."""
        body = bytearray()
        until = time.monotonic() + self.body_total_s
        while True:
            wait = min(self.body_idle_s, until - time.monotonic())
            try:
                message = await asyncio.wait_for(receive(), max(0.0, wait))
            except TimeoutError:
                said = (
                    f"no body bytes for {self.body_idle_s:g} s"
                    if wait == self.body_idle_s
                    else f"the body took over {self.body_total_s:g} s"
                )
                await _send(
                    send,
                    408,
                    {"content-type": "application/json", "connection": "close"},
                    error_body(HttpErrorCode.BAD_REQUEST, said).encode(),
                )
                return None
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES:
                await _send(
                    send,
                    413,
                    {"content-type": "application/json"},
                    error_body(HttpErrorCode.BAD_REQUEST, "body over 10 MiB").encode(),
                )
                return None
            if not message.get("more_body"):
                return bytes(body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            self.pool.shutdown(wait=False, cancel_futures=True)
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        send = self._with_cors(scope, send)
        if sum(len(k) + len(v) + 4 for k, v in scope.get("headers", [])) > MAX_HEADER_BYTES:
            await _send(
                send,
                431,
                {"content-type": "application/json", "connection": "close"},
                error_body(HttpErrorCode.BAD_REQUEST, f"headers over {MAX_HEADER_BYTES} bytes").encode(),
            )
            return
        if self.draining and scope.get("method") == "POST" and scope.get("path", "").rstrip("/") == "/recipes":
            await _send(
                send,
                503,
                {"content-type": "application/json", "retry-after": str(DRAIN_RETRY_AFTER_S)},
                error_body(
                    HttpErrorCode.SERVICE_UNAVAILABLE,
                    f"the server is stopping: no new jobs; retry after {DRAIN_RETRY_AFTER_S} s",
                ).encode(),
            )
            return
        body = await self._body(receive, send)
        if body is None:
            return
        event = http_api_event(scope, body)
        if len(json.dumps(event).encode()) > LAMBDA_PAYLOAD_BYTES:
            await _send(send, 413, {"content-type": "application/json"}, TOO_LARGE_BODY)
            return
        if self.authorizer and self.authorizer.guards(event["rawPath"], event["requestContext"]["http"]["method"]):
            claims = await asyncio.get_running_loop().run_in_executor(None, self.authorizer.claims, event["headers"])
            if claims is None:
                await _send(send, 401, UNAUTHORIZED_HEADERS, UNAUTHORIZED_BODY)
                return
            event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
        result = await asyncio.get_running_loop().run_in_executor(self.pool, self._handler_for(event["rawPath"]), event)
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else str(payload).encode()
        headers = {str(k).lower(): str(v) for k, v in (result.get("headers") or {}).items()}
        for cookie in result.get("cookies") or []:
            headers.setdefault("set-cookie", cookie)
        await _send(send, int(result.get("statusCode", 200)), headers, data)

    def _with_cors(self, scope: Scope, send: Send) -> Send:
        """``send``, adding the CORS headers (and ``Vary: Origin``) to an answer that has none: the front
        door's own. The function's answers carry their own."""
        origin = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"origin"), None)
        extra = self.cors(origin) if self.cors else {}
        if not extra:
            return send

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                if b"access-control-allow-origin" not in names:
                    added = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
                    message = {**message, "headers": [*message.get("headers", []), *added, (b"vary", b"Origin")]}
            await send(message)

        return sending


async def _send(send: Send, status: int, headers: dict[str, str], data: bytes) -> None:
    raw = [
        (k.encode("latin-1"), v.encode("latin-1", errors="replace"))
        for k, v in headers.items()
        if k != "content-length"
    ]
    raw.append((b"content-length", str(len(data)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def http_api_event(scope: Scope, body: bytes) -> dict[str, Any]:
    """The HTTP API payload format 2.0 event API Gateway would send for this request."""
    headers: dict[str, str] = {}
    for raw_key, raw_value in scope.get("headers", []):
        key = raw_key.decode("latin-1").lower()
        value = raw_value.decode("utf-8", errors="replace")  # API Gateway passes text; a bad byte is not fatal
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    query = scope.get("query_string", b"").decode("latin-1")
    path = scope.get("path", "/")
    try:
        text: str | None = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    client = scope.get("client") or ("127.0.0.1", 0)
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "queryStringParameters": dict(p.split("=", 1) if "=" in p else (p, "") for p in query.split("&") if p) or None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": "localhost",
            "stage": "$default",
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now * 1000),
            "http": {
                "method": scope.get("method", "GET"),
                "path": path,
                "protocol": f"HTTP/{scope.get('http_version')}",
                "sourceIp": client[0],
                "userAgent": headers.get("user-agent", ""),
            },
        },
        "body": (text if text is not None else base64.b64encode(body).decode()) if body else None,
        "isBase64Encoded": bool(body) and text is None,
    }
