"""The product's own doubles of what Lambda hands a handler: a context whose remaining time counts down, and an
HTTP API v2 event made from the repository's ``events/*.json`` (what ``sam local invoke -e`` would pass)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVENTS = Path(__file__).resolve().parents[2] / "events"


@dataclass
class Context:
    """The attributes of a Lambda context the handlers and Powertools read."""

    function_name: str
    memory_limit_in_mb: int
    aws_request_id: str
    deadline_ms: int  #: epoch milliseconds at which Lambda would stop the invocation
    invoked_function_arn: str = ""
    function_version: str = "$LATEST"
    log_group_name: str = "test"
    log_stream_name: str = "test"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - int(time.time() * 1000))


def api_event(method: str, path: str, body: str | None = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """``events/api-post.json`` or ``events/api-get.json`` with this request's method, path, body and headers."""
    event: dict[str, Any] = json.loads((EVENTS / ("api-post.json" if method == "POST" else "api-get.json")).read_text())
    event["rawPath"] = path
    event["requestContext"]["http"].update(method=method, path=path)
    event["body"] = body
    event["headers"].update({k.lower(): v for k, v in (headers or {}).items()})
    event["pathParameters"] = {"jobId": path.rsplit("/", 1)[-1]} if method == "GET" else {}
    return event
