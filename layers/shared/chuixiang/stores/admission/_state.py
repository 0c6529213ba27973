"""What admission reads and writes in the jobs table: the keys of its items (slots, lanes, the
line), what one read of them says (:class:`Seen`), and its limits; :mod:`._slots` decides with them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: Items the line is spread over (a caller's bucket is fixed by its digest).
LINE_BUCKETS = 16
#: Callers one bucket holds; beyond it a refused caller is not given a place (it is served behind the line).
LINE_BUCKET_MAX = 300
#: How long a place is kept after the ``Retry-After`` it was given: a client obeying it comes back in time.
WAIT_GRACE_S = 10
#: Longest ``Retry-After`` advertised: a caller deep in line comes back and keeps its place.
RETRY_AFTER_MAX_S = 30
#: How long a lane taken by a request that never named its slot (it died in between) stays held.
LANE_PENDING_S = 10
#: Free slots a request tries per read of the slots (others may be taking them at the same time)…
TRIES = 8
#: …and reads before it is refused while free slots remain (each was taken under it).
ROUNDS = 3
TICKET_KEY = {"pk": "ADMISSION#ticket"}
#: A slot is free when no item holds it or its holder's lease has run out.
FREE = "attribute_not_exists(pk) OR expiresAt < :now"


def slot_key(slot: int) -> dict[str, str]:
    return {"pk": f"ADMISSION#{slot}"}


def line_key(bucket: int) -> dict[str, str]:
    return {"pk": f"ADMISSION#line#{bucket}"}


def lane_key(caller: str, lane: int) -> dict[str, str]:
    return {"pk": f"ADMISSION#lane#{caller}#{lane}"}


def caller_digest(caller: str) -> str:
    """What the slots and the line store of a caller: fixed length, no user id in the table's admission items."""
    return hashlib.sha256(caller.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Held:
    """A slot taken and not yet freed: by whom, and when it is expected to free."""

    slot: int
    job_id: str
    caller: str
    ends: int
    taken: int


@dataclass(frozen=True)
class Lane:
    """One of a caller's lanes, as last written: its job, and the slot that job holds (-1: not yet named)."""

    job_id: str
    slot: int
    taken: int


@dataclass(frozen=True)
class Place:
    """A refused caller's place in line: first refused at ``since_ms``, kept until ``until``."""

    caller: str
    since_ms: int
    until: int


@dataclass(frozen=True)
class Refused:
    """No slot for this request: come back after ``retry_after_s``. ``reason``: ``full`` (waiting in line) or
    ``caller_limit`` (the caller already has its share in flight)."""

    retry_after_s: float
    reason: str


@dataclass
class Seen:
    """One consistent read of the slots and the line."""

    held: dict[int, Held]
    line: dict[int, dict[str, Place]]  # every place stored, kept or lapsed
    lanes: dict[int, Lane]  # the asking caller's
    now: int

    def of(self, caller: str) -> list[Held]:
        return [h for h in self.held.values() if h.caller == caller]

    def free(self, limit: int) -> list[int]:
        return [n for n in range(limit) if n not in self.held]

    def holds(self, lane: Lane) -> bool:
        """Whether ``lane`` is still held: its slot holds its job, or it was just taken and names none yet."""
        if lane.slot < 0:
            return lane.taken >= self.now - LANE_PENDING_S
        held = self.held.get(lane.slot)
        return held is not None and held.job_id == lane.job_id

    def kept(self, bucket: int) -> dict[str, Place]:
        return {c: p for c, p in self.line.get(bucket, {}).items() if p.until >= self.now}

    def place_of(self, caller: str) -> Place | None:
        return self.kept(line_bucket(caller)).get(caller)

    def waiting(self, caller: str) -> bool:
        """Whether anyone but ``caller`` keeps a place in line."""
        return any(p.caller != caller for b in range(LINE_BUCKETS) for p in self.kept(b).values())

    def ahead_of(self, caller: str) -> int:
        """Callers in line before ``caller`` (all of them when it has no place)."""
        mine = self.place_of(caller)
        places = [p for b in range(LINE_BUCKETS) for p in self.kept(b).values() if p.caller != caller]
        if mine is None:
            return len(places)
        return sum(1 for p in places if (p.since_ms, p.caller) < (mine.since_ms, mine.caller))


def line_bucket(digest: str) -> int:
    return int(digest, 16) % LINE_BUCKETS
