"""Admission (``chuixiang.stores.admission``) on an in-process moto table, the clock set by hand.

At most ``limit`` jobs in flight, at most ``per_caller`` of them one caller's; a refused caller keeps its
place in line while it comes back when told, and no newcomer (nor a caller whose job just ended) takes a
slot owed to someone ahead; ``Retry-After`` says when the slot a caller waits for is expected to free.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from chuixiang import clock as clock_module
from chuixiang.stores import job_times
from chuixiang.stores.admission import RETRY_AFTER_MAX_S, WAIT_GRACE_S, Admission, Refused
from chuixiang.stores.job_times import EXPECTED_JOB_S, MIN_SAMPLES, JobTimes

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DEADLINE = int((T0 + timedelta(seconds=600)).timestamp())


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Set the clock admission and the job times read to ``T0 + seconds``; forget any job time read earlier."""
    now = [T0]
    monkeypatch.setattr(clock_module, "now_utc", lambda: now[0])
    job_times._READ.clear()

    def at(seconds: float) -> None:
        now[0] = T0 + timedelta(seconds=seconds)

    return at


def test_a_caller_at_its_share_is_refused_while_others_are_admitted(table: Any, clock: Any) -> None:
    slots = Admission(table, limit=4, per_caller=2)
    assert isinstance(slots.admit("a-1", "alice", DEADLINE), int)
    assert isinstance(slots.admit("a-2", "alice", DEADLINE), int)
    refused = slots.admit("a-3", "alice", DEADLINE)
    assert isinstance(refused, Refused) and refused.reason == "caller_limit"
    assert isinstance(slots.admit("b-1", "bob", DEADLINE), int)


def test_a_refused_caller_keeps_its_place_and_a_newcomer_does_not_cut_in(table: Any, clock: Any) -> None:
    """One slot. Bob is refused while Alice's job runs; it ends; Carol (or Alice again, at once) finds the
    slot free but it is Bob's; Bob, back when told, takes it; then Carol, who waited behind him."""
    slots = Admission(table, limit=1)
    first = slots.admit("a-1", "alice", DEADLINE)
    assert first == 0
    clock(5)
    waiting = slots.admit("b-1", "bob", DEADLINE)
    assert isinstance(waiting, Refused) and waiting.reason == "full"
    clock(20)
    slots.release("a-1", first)
    assert isinstance(slots.admit("a-2", "alice", DEADLINE), Refused)  # the finisher re-POSTs at once
    assert isinstance(slots.admit("c-1", "carol", DEADLINE), Refused)
    clock(5 + waiting.retry_after_s)
    assert slots.admit("b-2", "bob", DEADLINE) == 0
    slots.release("b-2", 0)
    alice, carol = slots.admit("a-3", "alice", DEADLINE), slots.admit("c-2", "carol", DEADLINE)
    assert alice == 0 and isinstance(carol, Refused)  # alice was in line before carol (refused first)


def test_a_place_lapses_when_its_caller_does_not_come_back(table: Any, clock: Any) -> None:
    slots = Admission(table, limit=1)
    assert slots.admit("a-1", "alice", DEADLINE) == 0
    waiting = slots.admit("b-1", "bob", DEADLINE)
    assert isinstance(waiting, Refused)
    slots.release("a-1", 0)
    clock(waiting.retry_after_s + WAIT_GRACE_S - 1)
    assert isinstance(slots.admit("c-1", "carol", DEADLINE), Refused)  # still Bob's
    clock(waiting.retry_after_s + WAIT_GRACE_S + 1)
    assert slots.admit("c-2", "carol", DEADLINE) == 0  # Bob gave up: the slot is not held for ever


def test_retry_after_is_when_the_slot_a_caller_waits_for_is_expected_to_free(table: Any, clock: Any) -> None:
    """Jobs measured at ~15 s: the first in line is told when the oldest slot is due, the second when the
    next one is; before jobs were measured, a typical job's length (capped)."""
    times = JobTimes(table)
    for _ in range(MIN_SAMPLES):
        times.record(15.2)
    slots = Admission(table, limit=2)
    assert isinstance(slots.admit("a-1", "alice", DEADLINE), int)
    clock(4)
    assert isinstance(slots.admit("b-1", "bob", DEADLINE), int)
    clock(6)
    first, second = slots.admit("c-1", "carol", DEADLINE), slots.admit("d-1", "dave", DEADLINE)
    assert isinstance(first, Refused) and isinstance(second, Refused)
    assert first.retry_after_s == pytest.approx(15.2 - 6, abs=1)  # alice's slot, taken at 0
    assert second.retry_after_s == pytest.approx(15.2 + 4 - 6, abs=1)  # bob's, taken at 4


def test_retry_after_before_any_job_was_measured_is_capped(table: Any, clock: Any) -> None:
    slots = Admission(table, limit=1)
    assert slots.admit("a-1", "alice", DEADLINE) == 0
    clock(EXPECTED_JOB_S - 20)
    refused = slots.admit("b-1", "bob", DEADLINE)
    assert isinstance(refused, Refused) and refused.retry_after_s == min(20, RETRY_AFTER_MAX_S)
    clock(EXPECTED_JOB_S + 10)  # overdue: any moment now
    refused = slots.admit("b-2", "bob", DEADLINE)
    assert isinstance(refused, Refused) and refused.retry_after_s == 1


def test_a_lapsed_lease_frees_its_slot(table: Any, clock: Any) -> None:
    slots = Admission(table, limit=1)
    assert slots.admit("a-1", "alice", int((T0 + timedelta(seconds=30)).timestamp())) == 0
    clock(31)
    assert slots.admit("b-1", "bob", DEADLINE) == 0


def test_requests_of_one_caller_at_the_same_moment_never_exceed_its_share(table: Any, clock: Any) -> None:
    """Twenty requests of one caller race for ten free slots: at most its share of two is taken."""
    slots = Admission(table, limit=10, per_caller=2)
    results: list[int | Refused] = []
    start = threading.Barrier(20)

    def ask(n: int) -> None:
        start.wait()
        results.append(slots.admit(f"{n:08x}-job", "alice", DEADLINE))

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    admitted = [r for r in results if isinstance(r, int)]
    assert len(admitted) == 2, results  # exactly its share: the lanes are taken by compare-and-swap
    slots_held = [i for i in table.scan()["Items"] if str(i["pk"]).removeprefix("ADMISSION#").isdigit()]
    assert sorted(int(str(i["pk"]).rsplit("#", 1)[1]) for i in slots_held) == sorted(admitted)


def test_a_lane_frees_with_its_slot_whoever_frees_it(table: Any, clock: Any) -> None:
    """The workflow deletes only the slot item (``FreeSlot``): the caller's share is back with it."""
    slots = Admission(table, limit=4, per_caller=1)
    first = slots.admit("a-1", "alice", DEADLINE)
    assert isinstance(first, int) and isinstance(slots.admit("a-2", "alice", DEADLINE), Refused)
    table.delete_item(Key={"pk": f"ADMISSION#{first}"})  # what the state machine's FreeSlot does
    assert isinstance(slots.admit("a-3", "alice", DEADLINE), int)


def test_the_line_stores_no_caller_id_only_a_digest(table: Any, clock: Any) -> None:
    slots = Admission(table, limit=1)
    slots.admit("a-1", "openid-of-alice", DEADLINE)
    slots.admit("b-1", "openid-of-bob", DEADLINE)
    items = table.scan()["Items"]
    assert items and not any("openid" in str(item) for item in items)
