"""EventBridge's rule for the reconciler: each execution that ended badly, delivered to one function."""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from chuixiang_local.cloud.executions import Executions
from chuixiang_local.cloud.vended_metrics import VendedMetrics
from chuixiang_local.workers.invoker import Invocation

#: Deliveries of one execution's event before the stand-in gives up on it (EventBridge retries an event
#: for up to 24 h; a developer's run is shorter).
WATCH_ATTEMPTS = 5
#: How often the stand-in looks for executions that ended badly (EventBridge takes ~0.5 s too).
WATCH_INTERVAL_S = 0.5


class EventBridgeStandIn:
    """A thread delivering each execution that ended badly to ``target`` until the delivery succeeds. Like
    EventBridge, any one failure (reading the executions, describing one, the invocation itself) is retried
    on the next pass, up to :data:`WATCH_ATTEMPTS` times per execution, and never stops the thread."""

    def __init__(
        self,
        executions: Executions,
        target: Callable[[dict[str, Any]], Invocation] | None,
        log: TextIO | None,
        vended: VendedMetrics | None = None,
    ) -> None:
        """``target``: invokes the function the template subscribes to the events (None: nobody is);
        ``vended``: counts the executions each pass sees start and end (AWS/States)."""
        self.executions = executions
        self.vended = vended
        self.target = target
        self.log = log
        self._stop = threading.Event()
        self._delivered: set[str] = set()
        self._attempts: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, name="eventbridge", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)  # a daemon: it only has to not start a delivery now

    def alive(self) -> bool:
        return self._thread.is_alive()

    def delivered(self, execution_arn: str) -> bool:
        """Handled: delivered (or given up on after :data:`WATCH_ATTEMPTS`)."""
        return execution_arn in self._delivered

    def _run(self) -> None:
        while not self._stop.wait(WATCH_INTERVAL_S):
            try:
                if self.vended is not None:
                    self.vended.observe(self.executions)
                ended = self.executions.ended_badly()
            except Exception:  # the stand-in must outlive any one failure
                traceback.print_exc(file=self.log or sys.stderr)
                continue
            for arn in ended:
                if arn not in self._delivered and not self._stop.is_set():
                    self._deliver(arn)

    def _deliver(self, arn: str) -> None:
        try:
            if self.target is not None:
                done = self.target(self.executions.status_change_event(self.executions.describe(arn)))
                if done.failed:
                    raise RuntimeError(f"the target failed: {done.payload}")
        except Exception:  # retried on the next pass
            self._attempts[arn] = self._attempts.get(arn, 0) + 1
            print(
                f"eventbridge: delivery {self._attempts[arn]} of {arn} failed", file=self.log or sys.stderr, flush=True
            )
            traceback.print_exc(file=self.log or sys.stderr)
            if self._attempts[arn] < WATCH_ATTEMPTS:
                return
        self._delivered.add(arn)
