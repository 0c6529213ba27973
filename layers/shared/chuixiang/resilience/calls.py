"""What the router and a call exchange: the context a call is given, its reply and immutable report, the
record of each call made, the routes a stage's calls may take, and what routing ended with."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from ..deadline import Deadline
from ..schemas import UpstreamCall
from ..upstream.chat_reader import Completion
from ..upstream.failures import CircuitOpen, UpstreamError
from ..upstream.watchdog import Cancellation
from .breaker import Permit
from .fastest import FastestFirst
from .health import HealthStore, Observation
from .hedge import Hedge

T = TypeVar("T")


class Breaker(Protocol):
    """What the router asks of a model's circuit breaker (:class:`~.breaker.CircuitBreaker`)."""

    def permit(self, lease_s: float) -> Permit: ...

    def record(self, permit: Permit, *, healthy: bool) -> None: ...

    def refusing(self) -> bool: ...


def no_race() -> bool:
    """The race hook of a call that races nobody: it always writes first."""
    return True


@dataclass(frozen=True)
class CallContext:
    """What one call is given: the model, which attempt on it this is (from 1), the deadline the router cut
    for it and when it started timing the call (monotonic), the cancellation the call must pass on (a lost
    hedge race, a job nobody reads any more), and ``claim_first_write``: to call when the model first writes;
    False means another call of a hedge race wrote first: stop. (A stream's own "first text" event is the
    reader's: :meth:`chuixiang.upstream.chat_reader.StreamObserver.first_text`.)"""

    model: str
    number: int
    deadline: Deadline
    started: float = field(default_factory=time.monotonic)
    cancellation: Cancellation = field(default_factory=Cancellation)
    claim_first_write: Callable[[], bool] = no_race


@dataclass(frozen=True)
class CallReport:
    """What one call measured, for the router to record: the HTTP status, what the call will be billed (the
    provider's count, else estimated; None: nothing reached the model) and what it says of the model's health."""

    status: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    observation: Observation | None = None
    cached_prompt_tokens: int | None = None  #: of the prompt's, those the provider's prefix cache held
    completion: Completion | None = None  #: what a streamed call read, whole or up to its failure


@dataclass(frozen=True)
class CallRecord:
    """One call made: its model, the deadline it had, and its report."""

    model: str
    deadline: Deadline
    report: CallReport


@dataclass(frozen=True)
class Reply(Generic[T]):
    """One call's answer: its value or its failure, and its report."""

    value: T | None = None
    failure: UpstreamError | None = None
    report: CallReport = field(default_factory=CallReport)


@dataclass(frozen=True)
class Routed(Generic[T]):
    """What routing ended with: the answer or the last failure, the model that answered (or the last one
    tried), every call made and the time it all took."""

    result: T | None
    failure: UpstreamError | None
    model: str | None
    calls: tuple[UpstreamCall, ...]
    total_ms: int
    records: tuple[CallRecord, ...] = ()  #: the calls that reached the model's code, in the order they ended

    def latest(self, model: str | None) -> CallRecord | None:
        """The last call ``model`` made (None: the last call made), or None."""
        return next((r for r in reversed(self.records) if r.model == model), self.records[-1] if self.records else None)

    @property
    def attempts(self) -> int:
        """Requests actually sent (a model passed over by its breaker or skipped sent none)."""
        return sum(1 for c in self.calls if c.outcome not in (CircuitOpen.outcome, "skipped"))


def _no_breaker(model: str) -> Breaker | None:
    return None


def _no_health(model: str) -> HealthStore | None:
    return None


@dataclass(frozen=True)
class Routes:
    """Where a stage's calls may go, built once per job (``steps.py``): the models in their configured order,
    each one's breaker and health store, and the optional ``fastest`` ordering and ``hedge``."""

    models: tuple[str, ...]
    breaker_for: Callable[[str], Breaker | None] = _no_breaker
    health_for: Callable[[str], HealthStore | None] = _no_health
    fastest: FastestFirst | None = None
    hedge: Hedge | None = None

    def ordered(self) -> tuple[str, ...]:
        return tuple(self.fastest.order(self.models)) if self.fastest else self.models
