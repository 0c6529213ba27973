"""Hedging the first token: when a model is slow to write, the next candidate races it; the first to write wins."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..upstream.watchdog import Cancellation
from .health import ModelHealth


class HedgeRace:
    """Two calls racing to the model's first text: the first to write wins, the other is closed at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.winner: str | None = None
        self.decided = threading.Event()
        self._calls: dict[str, Cancellation] = {}
        #: When each model's first request started (monotonic): the hedge's clock runs from the primary's.
        self.began: dict[str, float] = {}
        self.first_began = threading.Event()

    def enter(self, model: str, cancellation: Cancellation) -> None:
        """A call of ``model`` starts: it can be closed from now on (at once if the race went to the other)."""
        with self._lock:
            self._calls[model] = cancellation
            lost = self.winner not in (None, model)
        if lost:
            cancellation.cancel(f"hedge lost: {self.winner} wrote first")

    def begin(self, model: str, at: float) -> None:
        """``model``'s request started at ``at``: the first one starts the clock the hedge is measured on."""
        with self._lock:
            self.began.setdefault(model, at)
        self.first_began.set()

    def claim(self, model: str) -> bool:
        """``model`` wrote: True if it won (or had already), False if the other had."""
        with self._lock:
            if self.winner is not None:
                return self.winner == model
            self.winner = model
            losers = [c for m, c in self._calls.items() if m != model]
        self.decided.set()
        for cancellation in losers:
            cancellation.cancel(f"hedge lost: {model} wrote first")
        return True

    def silent_for(self, model: str, after_s: float, done: Callable[[], bool]) -> bool:
        """Wait until ``model`` has written nothing for ``after_s`` since its request began (True: hedge now),
        or until its calls are ``done`` or the race is decided (False). The silence counts from the model's
        request, not from the caller's thread: the breaker's read and the connection before it are not the
        model's silence."""
        while not done() and not self.first_began.wait(0.05):
            pass
        hedge_at = self.began.get(model, time.monotonic()) + after_s
        while not done() and not self.decided.is_set() and (left := hedge_at - time.monotonic()) > 0:
            self.decided.wait(min(left, 0.05))
        return not done() and not self.decided.is_set()

    def lost(self, model: str) -> bool:
        return self.winner not in (None, model)


class HedgeBudget:
    """At most ``share`` of one endpoint's jobs in this container get a hedge, so a slow hour cannot double the
    model bill: a token bucket where each job adds ``share`` of a token (up to ``burst``) and a hedge takes one."""

    def __init__(self, share: float = 0.2, burst: float = 2.0) -> None:
        self.share, self.burst = share, burst
        self.tokens = burst
        self._lock = threading.Lock()

    def earn(self) -> None:
        with self._lock:
            self.tokens = min(self.burst, self.tokens + self.share)

    def take(self) -> bool:
        with self._lock:
            if self.tokens < 1:
                return False
            self.tokens -= 1
            return True


_BUDGETS: dict[str, HedgeBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def hedge_budget(endpoint: str) -> HedgeBudget:
    """The hedge budget of one endpoint, shared by every job of this container."""
    with _BUDGETS_LOCK:
        return _BUDGETS.setdefault(endpoint.rstrip("/"), HedgeBudget())


@dataclass(frozen=True)
class Hedge:
    """``RecipeHedgeAfterMs``: when the model has written nothing for this long (or for its measured p90 first
    content, if known and shorter), the next candidate is called too; the first to write wins. One per job."""

    after_ms: float
    budget: HedgeBudget
    health: dict[str, ModelHealth] = field(default_factory=dict)

    def after_s(self, model: str) -> float:
        measured = self.health.get(model)
        p90 = measured.first_content_p90_ms if measured is not None and measured.known else None
        return min(self.after_ms, p90 or self.after_ms) / 1000
