"""X-Ray subsegments for where a job's time goes: each model call, StartExecution, each DynamoDB call.

With ``Tracing: Active`` Lambda records each invocation and Step Functions each state, but the 90-second wait
inside the recipe function is one opaque bar. These subsegments open it. They are sent as the X-Ray SDK sends
them: one JSON document per UDP datagram to the daemon Lambda runs beside the function
(``AWS_XRAY_DAEMON_ADDRESS``), under the invocation's segment (``_X_AMZN_TRACE_ID``: ``Root``, ``Parent``,
``Sampled``). Not through the SDK: importing ``aws_xray_sdk`` and patching botocore costs a cold start
hundreds of times what this module does (``bench/tracing_cold_start.py``). Outside Lambda, or when the
invocation is not sampled, a span costs a dictionary lookup and sends nothing; a send never raises.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Iterator
from typing import Any, TypeVar

C = TypeVar("C")
HEADER = b'{"format": "json", "version": 1}\n'
_socket: socket.socket | None = None


def trace_context() -> tuple[str, str] | None:
    """(trace id, parent segment id) of this invocation when it is sampled; None otherwise."""
    fields = dict(part.split("=", 1) for part in os.environ.get("_X_AMZN_TRACE_ID", "").split(";") if "=" in part)
    if fields.get("Sampled") != "1" or not fields.get("Root") or not fields.get("Parent"):
        return None
    return fields["Root"], fields["Parent"]


def daemon_address() -> tuple[str, int]:
    """The daemon's UDP address: ``host:port``, or the ``udp:host:port tcp:host:port`` form."""
    value = os.environ.get("AWS_XRAY_DAEMON_ADDRESS", "127.0.0.1:2000")
    udp = next((p.removeprefix("udp:") for p in value.split() if not p.startswith("tcp:")), value)
    host, _, port = udp.rpartition(":")
    return host or "127.0.0.1", int(port)


def send(document: dict[str, Any]) -> None:
    """One subsegment to the daemon; dropped, as the SDK drops it, when it cannot be sent."""
    global _socket
    try:
        if _socket is None:
            _socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            _socket.setblocking(False)
        _socket.sendto(HEADER + json.dumps(document, separators=(",", ":")).encode(), daemon_address())
    except (OSError, ValueError):
        pass


@contextlib.contextmanager
def span(name: str, namespace: str = "remote", **annotations: str | int | float | bool) -> Iterator[dict[str, Any]]:
    """A subsegment around the block (``namespace``: ``aws`` for an AWS call, ``remote`` for the model); the
    yielded dict takes more ``metadata``. An exception marks it a fault and goes on."""
    context = trace_context()
    extra: dict[str, Any] = {}
    started = time.time()
    fault = False
    try:
        yield extra
    except BaseException:
        fault = True
        raise
    finally:
        if context is not None:
            document: dict[str, Any] = {
                "name": name[:200],
                "id": secrets.token_hex(8),
                "trace_id": context[0],
                "parent_id": context[1],
                "start_time": started,
                "end_time": time.time(),
                "type": "subsegment",
                "namespace": namespace,
                "annotations": annotations,
                "fault": fault,
            }
            if extra:
                document["metadata"] = {"chuixiang": extra}
            send(document)


def trace_aws_calls(client: C) -> C:
    """A subsegment per call ``client`` makes (``DynamoDB.GetItem``, ``SFN.StartExecution``…), through
    botocore's own event hooks. Returns ``client``."""
    meta: Any = getattr(client, "meta")  # noqa: B009 - botocore clients are typed per service
    events = meta.events
    service = meta.service_model.service_id.hyphenize()

    def before(context: dict[str, Any], **_: Any) -> None:
        context["chuixiang_started"] = time.time()

    def after(context: dict[str, Any], model: Any, http_response: Any = None, **_: Any) -> None:
        started = context.pop("chuixiang_started", None)
        trace = trace_context()
        if started is None or trace is None:
            return
        status = getattr(http_response, "status_code", 0) or 0
        send(
            {
                "name": service,
                "id": secrets.token_hex(8),
                "trace_id": trace[0],
                "parent_id": trace[1],
                "start_time": started,
                "end_time": time.time(),
                "type": "subsegment",
                "namespace": "aws",
                "aws": {"operation": model.name},
                "http": {"response": {"status": status}},
                "error": 400 <= status < 500,
                "fault": status >= 500,
            }
        )

    events.register(f"before-call.{service}", before)
    events.register(f"after-call.{service}", after)
    return client
