"""serve's count of open API requests (what holds the functions' dispatches) starts at a request's last
body byte: a client that stalls mid-body is never counted."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from chuixiang_local.cloud.front_door import SharedCount
from chuixiang_local.gateway.api_server import counting_open_requests


def test_a_request_counts_from_its_last_body_byte_to_its_answer() -> None:
    count = SharedCount.create()
    seen: list[tuple[str, int]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            seen.append(("read", count.value()))
            if not message.get("more_body"):
                break
        seen.append(("answering", count.value()))

    parts = iter(
        [
            {"type": "http.request", "body": b"{", "more_body": True},
            {"type": "http.request", "body": b"}", "more_body": False},
        ]
    )

    async def receive() -> dict[str, Any]:
        return next(parts)

    async def send(message: dict[str, Any]) -> None:
        pass

    asyncio.run(counting_open_requests(app, count)({"type": "http"}, receive, send))
    assert seen == [("read", 0), ("read", 1), ("answering", 1)]
    assert count.value() == 0


def test_a_request_that_never_finishes_its_body_is_never_counted() -> None:
    count = SharedCount.create()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        raise TimeoutError("the client stalled")  # what LambdaAsgi's body timeout ends it with

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{", "more_body": True}

    async def run() -> None:
        with contextlib.suppress(TimeoutError):
            await counting_open_requests(app, count)({"type": "http"}, receive, None)

    asyncio.run(run())
    assert count.value() == 0
