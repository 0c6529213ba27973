"""The metrics AWS vends for the stack's services, as the local stand-ins see them.

On AWS, API Gateway publishes ``AWS/ApiGateway`` (Count, 4xx, 5xx, Latency, by ``ApiId``), Lambda
``AWS/Lambda`` (Invocations, Errors, Throttles, Duration, ConcurrentExecutions, by ``FunctionName``) and Step
Functions ``AWS/States`` (ExecutionsStarted, ExecutionsSucceeded/Failed/TimedOut/Aborted, ExecutionTime, by
``StateMachineArn``) without a line of our code. Locally nobody does, so the dashboard rows that read them would
stay empty. The local cloud writes them here as Embedded Metric Format lines, in the same log as the
functions' own EMF, and ``chuixiang dashboard`` reads both alike. (The API's are counted where the local
cloud answers it in-process, ``LocalApi``: ``cook`` and the tests, not ``serve``'s own process.)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TextIO

from chuixiang_local.cloud.executions import Executions

#: Terminal statuses as AWS/States counts them (moto's States.Timeout failure is TIMED_OUT on AWS).
ENDED = {"SUCCEEDED": "ExecutionsSucceeded", "FAILED": "ExecutionsFailed", "TIMED_OUT": "ExecutionsTimedOut"}
ENDED["ABORTED"] = "ExecutionsAborted"


def _ms(value: datetime | None) -> int:
    return int(value.timestamp() * 1000) if value is not None else int(time.time() * 1000)


class VendedMetrics:
    """Writes the vended metrics of one local stack into ``log`` (None: nowhere)."""

    def __init__(self, log: TextIO | None, state_machine_arn: str) -> None:
        self.log, self.state_machine_arn = log, state_machine_arn
        self._lock = threading.Lock()
        self._started: set[str] = set()
        self._ended: set[str] = set()

    def invoked(self, function_name: str, duration_ms: float, failed: bool, concurrent: int) -> None:
        """One invocation ran: counted, timed, an error if it failed (crash, unhandled error, timeout)."""
        self._write(
            "AWS/Lambda",
            {"FunctionName": function_name},
            {
                "Invocations": (1, "Count"),
                "Errors": (1 if failed else 0, "Count"),
                "Duration": (duration_ms, "Milliseconds"),
                "ConcurrentExecutions": (concurrent, "Count"),
            },
        )

    def api_request(self, api_id: str, status: int, latency_ms: float) -> None:
        """One request the HTTP API answered: counted, by status class, and timed (AWS/ApiGateway)."""
        self._write(
            "AWS/ApiGateway",
            {"ApiId": api_id},
            {
                "Count": (1, "Count"),
                "4xx": (1 if 400 <= status < 500 else 0, "Count"),
                "5xx": (1 if status >= 500 else 0, "Count"),
                "Latency": (latency_ms, "Milliseconds"),
            },
        )

    def throttled(self, function_name: str) -> None:
        self._write("AWS/Lambda", {"FunctionName": function_name}, {"Throttles": (1, "Count")})

    def observe(self, executions: Executions) -> None:
        """Count each execution once when first seen, and once when it has ended."""
        for ex in executions.all():
            arn = ex.execution_arn
            if arn not in self._started:
                self._started.add(arn)
                self._execution({"ExecutionsStarted": (1, "Count")}, _ms(getattr(ex, "start_date", None)))
            status = "TIMED_OUT" if getattr(ex, "error", None) == "States.Timeout" else ex.status
            if status in ENDED and arn not in self._ended:
                self._ended.add(arn)
                stopped = getattr(ex, "stop_date", None)
                took = _ms(stopped) - _ms(getattr(ex, "start_date", None))
                figures = {ENDED[status]: (1, "Count"), "ExecutionTime": (took, "Milliseconds")}
                self._execution(figures, _ms(stopped))

    def _execution(self, metrics: Mapping[str, tuple[float, str]], at_ms: int) -> None:
        self._write("AWS/States", {"StateMachineArn": self.state_machine_arn}, metrics, at_ms)

    def _write(
        self, namespace: str, dims: dict[str, str], metrics: Mapping[str, tuple[float, str]], at_ms: int | None = None
    ) -> None:
        if self.log is None:
            return
        doc: dict[str, Any] = {
            "_aws": {
                "Timestamp": at_ms if at_ms is not None else int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": namespace,
                        "Dimensions": [list(dims)],
                        "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in metrics.items()],
                    }
                ],
            },
            **dims,
            **{name: value for name, (value, _) in metrics.items()},
        }
        with self._lock:
            self.log.write(json.dumps(doc) + "\n")
            self.log.flush()
