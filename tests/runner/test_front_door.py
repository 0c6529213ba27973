"""``serve``'s front door first: an invocation waits while a request is open at the API, within a bound."""

from __future__ import annotations

import os
import threading
import time

from chuixiang.limit_rules import STATE_TIMEOUT_MARGIN_S
from chuixiang_local.cloud.front_door import FrontDoorPriority, SharedCount

from ..support.waiting import wait_until


def _held_in_thread(gate: FrontDoorPriority) -> tuple[threading.Thread, list[float]]:
    released: list[float] = []

    def wait() -> None:
        gate.wait_quiet()
        released.append(time.monotonic())

    waiter = threading.Thread(target=wait)
    waiter.start()
    return waiter, released


class OpenRequests:
    """What the API process's count would say, set by the test."""

    def __init__(self) -> None:
        self.open = 0
        self.reads = 0  #: how often the gate looked: proof that it saw the count and still held

    def __call__(self) -> int:
        self.reads += 1
        return self.open


def test_an_invocation_waits_while_a_request_is_open_at_the_api_then_goes() -> None:
    requests = OpenRequests()
    gate = FrontDoorPriority(requests, max_hold_s=30)
    requests.open = 1
    waiter, released = _held_in_thread(gate)
    # The gate has read the open request several times (on arrival, then its watcher) and still holds.
    wait_until(lambda: requests.reads >= 3, timeout_s=10, what="the gate polled the open count")
    assert waiter.is_alive() and not released
    answered = time.monotonic()
    requests.open = 0
    waiter.join(timeout=10)
    assert released and released[0] >= answered  # as soon as the API is quiet
    assert gate.held[0] < 10 and gate.summary().startswith("front door first: 1 of 1 invocations held")


def test_a_quiet_front_door_holds_nothing() -> None:
    gate = FrontDoorPriority(OpenRequests(), max_hold_s=30)
    waiter, released = _held_in_thread(gate)
    waiter.join(timeout=10)
    assert released and not gate.held and gate.summary() == "front door first: 0 of 1 invocations held"


def test_the_hold_is_bounded_so_the_state_timeout_is_never_what_fires() -> None:
    requests = OpenRequests()
    requests.open = 1  # a request that never ends
    gate = FrontDoorPriority(requests, max_hold_s=0.3)
    waiter, released = _held_in_thread(gate)
    waiter.join(timeout=10)
    assert released and 0.3 <= gate.held[0] < 10
    assert "1 let go by the 0.3 s bound" in gate.summary()
    # The default bound is half the margin by which every Task state outlives its function.
    assert FrontDoorPriority(OpenRequests()).max_hold_s == STATE_TIMEOUT_MARGIN_S / 2


def test_the_api_process_count_is_what_the_gate_reads() -> None:
    count = SharedCount.create()
    assert os.fstat(count.fd).st_nlink == 0  # no name: a serve killed with SIGKILL leaves nothing in /tmp
    written_by_the_api = SharedCount(os.dup(count.fd))  # the other process's mapping of the same file
    reads = [0]

    def read() -> int:
        reads[0] += 1
        return count.value()

    gate = FrontDoorPriority(read, max_hold_s=30)
    written_by_the_api.add(2)
    waiter, released = _held_in_thread(gate)
    written_by_the_api.add(-1)
    seen = reads[0]
    # The gate's watcher has read the count twice since it dropped to 1 and still holds.
    wait_until(lambda: reads[0] >= seen + 2, timeout_s=10, what="the gate polled the shared count")
    assert waiter.is_alive() and count.value() == 1
    written_by_the_api.add(-1)
    waiter.join(timeout=10)
    assert released and count.value() == 0
    count.close()
    count.close()  # a second close does nothing (a descriptor number may be another file's by then)
    written_by_the_api.close()
    assert count.value() == 0  # the mapping outlives the descriptor
