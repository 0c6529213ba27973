"""What a provider key can lend a job in sections: streams beyond the one each job holds, and tokens.

Admission counts jobs (:mod:`~chuixiang.stores.admission`): each holds one model stream for its life. A job
written in sections needs more at once, the outline's and one a section: it **borrows** them from what the key
has spare when its recipe stage opens them, and gives them back when the stage ends. Spare means spare after
every job admission may let run has its own stream, so a loan never takes a stream a newcomer's job needs:

- the key's quota stated (``RecipeKeyStreams``): ``streams - jobs admitted at once - streams lent``;
- not stated, and never refused: as many as asked (a hosted API that batches requests);
- not stated, and refused lately (a 429 on any call of the key): none, until a **probe**: after
  :data:`PROBE_FIRST_S`, one job at a time borrows as if never refused; a probe refused again doubles the wait
  (up to :data:`PROBE_MAX_S`), a probe that ran without a refusal forgets the refusals (the key showed more).

Tokens likewise, where the key's tokens per minute are stated (``RecipeKeyTokensPerMinute``, counted at admission
as prompt + ``max_tokens``): a loan's extra reservation fits in what the minute has left once every job admission
may let run has reserved a whole answer, less the loans of the last minute.

This module is the policy, over a record of the key; the DynamoDB store is :mod:`chuixiang.stores.key_streams`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

#: After the key's first refusal, a probe may borrow this long after it; each refused probe doubles the wait…
PROBE_FIRST_S = 300.0
#: …up to this.
PROBE_MAX_S = 3600.0
#: The window a key's tokens per minute are counted over.
MINUTE_S = 60.0


@dataclass(frozen=True)
class KeyQuotas:
    """What the team states of its key (0: not stated), and the jobs admission lets run at once."""

    streams: int = 0
    tokens_per_minute: int = 0
    jobs: int = 1
    whole_tokens: int = 0  #: what one whole answer reserves (prompt + max_tokens)


@dataclass(frozen=True)
class LoanEntry:
    streams: int
    tokens: int
    at: float  #: when it was lent
    until: float  #: its lease: the job's deadline (a job that died gives it back then)


@dataclass(frozen=True)
class KeyRecord:
    """What the key's item says: its loans, its last refusal and the wait before the next probe."""

    loans: dict[str, LoanEntry] = field(default_factory=dict)
    refused_at: float | None = None
    probe_after_s: float = PROBE_FIRST_S
    probing: str | None = None  #: the job probing now (one at a time)
    version: int = 0

    def live(self, now: float, but: str = "") -> dict[str, LoanEntry]:
        return {j: e for j, e in self.loans.items() if e.until >= now and j != but}

    def next(
        self,
        loans: dict[str, LoanEntry],
        *,
        probing: str | None,
        refused_at: float | None = None,
        probe_after_s: float | None = None,
    ) -> KeyRecord:
        """The record that follows this one: its version the next, what is not given kept (built directly, not by
        ``dataclasses.replace``: a job's every refused ask writes one, and ``replace`` costs 3x the building)."""
        return KeyRecord(
            loans=loans,
            refused_at=self.refused_at if refused_at is None else refused_at,
            probe_after_s=self.probe_after_s if probe_after_s is None else probe_after_s,
            probing=probing,
            version=self.version + 1,
        )


@dataclass(frozen=True)
class Loan:
    """What a job was lent: extra streams and tokens (0 and 0: none, and ``why``), and whether it is a probe."""

    streams: int
    tokens: int
    why: str
    probe: bool = False


def lend(record: KeyRecord, quotas: KeyQuotas, job: str, streams: int, tokens: int, now: float) -> Loan:  # noqa: PLR0917 - a pure policy
    """What the key lends ``job`` of the ``streams`` extra streams and ``tokens`` extra tokens it asks for: all or
    nothing (fewer streams make another plan: the caller asks again for that one)."""
    live = record.live(now, but=job)
    spare, why = _spare_streams(record, quotas, live, now)
    if spare is not None and spare < streams:
        return Loan(0, 0, why)
    if quotas.tokens_per_minute:
        minute = sum(e.tokens for e in live.values() if e.at >= now - MINUTE_S)
        left = quotas.tokens_per_minute - quotas.jobs * quotas.whole_tokens - minute
        if left < tokens:
            return Loan(0, 0, f"the key's minute has {max(left, 0)} tokens spare, the plan reserves {tokens} more")
    probe = record.refused_at is not None and not quotas.streams
    return Loan(streams, tokens, why, probe=probe)


def _spare_streams(
    record: KeyRecord, quotas: KeyQuotas, live: dict[str, LoanEntry], now: float
) -> tuple[int | None, str]:
    """(streams the key has spare, None: no limit known; why)."""
    lent = sum(e.streams for e in live.values())
    if quotas.streams:
        spare = quotas.streams - min(quotas.jobs, quotas.streams) - lent
        return spare, f"RecipeKeyStreams={quotas.streams}: {max(spare, 0)} spare beside {quotas.jobs} jobs' own"
    if record.refused_at is None:
        return None, "the key has refused no call"
    wait = record.refused_at + record.probe_after_s - now
    if wait > 0:
        return 0, f"the key refused a call {now - record.refused_at:.0f} s ago (429): sections again in {wait:.0f} s"
    probing = record.probing is not None and record.probing in live
    if probing:
        return 0, "the key refused lately and another job is probing it"
    return None, f"the key refused a call {now - record.refused_at:.0f} s ago: this job probes it"


def lent(record: KeyRecord, job: str, loan: Loan, now: float, until: float) -> KeyRecord:
    """The record once ``loan`` is lent to ``job`` (the lapsed loans swept)."""
    loans = {**record.live(now, but=job), job: LoanEntry(loan.streams, loan.tokens, now, until)}
    return record.next(loans, probing=job if loan.probe else record.probing)


def given_back(record: KeyRecord, job: str, now: float, *, refused: bool) -> KeyRecord:
    """The record once ``job`` gives its loan back, having seen the key refuse a call (``refused``) or not. A
    refusal dates the key's refusals (a refused probe doubles the wait before the next); a probe that ran
    without one forgets them."""
    loans = record.live(now, but=job)
    probing = record.probing if record.probing != job else None
    if refused:
        was_probe = record.probing == job
        wait = min(record.probe_after_s * 2, PROBE_MAX_S) if was_probe else record.probe_after_s
        return record.next(loans, probing=probing, refused_at=now, probe_after_s=wait)
    if record.probing == job:
        return KeyRecord(loans=loans, version=record.version + 1)
    return record.next(loans, probing=probing)


class KeyStore(Protocol):
    """Where a key's record lives: a read, and a write that applies only over the version read."""

    def read(self) -> KeyRecord: ...

    def write(self, record: KeyRecord, read_version: int) -> bool: ...


class MemoryKeyStore:
    """A key's record in one process (a bench, a test with no table): the same policy as the table's store, its
    write applying only over the version read."""

    def __init__(self) -> None:
        self._record = KeyRecord()
        self._lock = threading.Lock()

    def read(self) -> KeyRecord:
        with self._lock:
            return self._record

    def write(self, record: KeyRecord, read_version: int) -> bool:
        with self._lock:
            if self._record.version != read_version:
                return False
            self._record = record
            return True


class Lender(Protocol):
    """One job's dealings with its key (:class:`chuixiang.stores.key_streams.KeyLender`)."""

    def borrow(self, streams: int, tokens: int) -> Loan: ...

    def give_back(self, *, refused: bool) -> None: ...
