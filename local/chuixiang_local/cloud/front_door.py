"""``chuixiang serve`` answers the front door first.

On AWS the API and the functions never share a CPU, and DynamoDB serves every caller at once.
Here they share two cores and moto's one interpreter, and a herd of POSTs starts as many
executions as it answers: each execution's functions (a fork, the model stream, their own
DynamoDB calls) would compete with the POSTs still waiting for their 202. Two measures:

* :class:`FrontDoorPriority`: a Lambda invocation the state machine asks for waits while a request
  is open at the API process (from its arrival to its answer, every AWS call of the api function
  included), which writes that count into a :class:`SharedCount`. Holding a dispatch delays only
  when a function's budget starts (its Timeout runs from the moment a worker has the event); the
  hold comes out of the Task state's TimeoutSeconds, which is ``STATE_TIMEOUT_MARGIN_S`` above the
  function's Timeout, so the hold is bounded by half that margin.
* :class:`FrontDoorCallsFirst`: moto serves one AWS call at a time, the api function's first.
  Sixty streaming jobs write their progress every 2 s; in arrival order a GET's one read queued
  behind those writes (and behind the interpreter lock they all contend for), and POST p95 was
  2-6 s. The functions keep one turn in four while API calls wait, and a call of theirs that has
  waited ``max_wait_s`` goes ahead at the next turn, so no function's Timeout is spent waiting for
  the front door: with the API's calls strictly first, clients that POST again at once on a 429
  ended a third of the admitted jobs ``INTERNAL``.
"""

from __future__ import annotations

import collections
import mmap
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from chuixiang.limit_rules import STATE_TIMEOUT_MARGIN_S

_COUNT = struct.Struct("q")


class SharedCount:
    """One integer in a memory-mapped file without a name: the API process writes it, serve's moto process reads
    it, serve handing the API process its descriptor (``fd``). A named file was left in /tmp by every ``serve``
    killed with SIGKILL. One writer (the API's event loop), and an aligned 8-byte store is atomic on our CPUs."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, _COUNT.size)

    @classmethod
    def create(cls) -> SharedCount:
        fd, path = tempfile.mkstemp(prefix="chuixiang-api-requests-")
        os.unlink(path)  # nameless from here on: nothing is left behind, however its processes end
        os.ftruncate(fd, _COUNT.size)
        return cls(fd)

    def close(self) -> None:
        """Let go of the descriptor, once (the mapping lives on while it is read)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def add(self, delta: int) -> None:
        _COUNT.pack_into(self._map, 0, self.value() + delta)

    def value(self) -> int:
        return int(_COUNT.unpack_from(self._map, 0)[0])


class FrontDoorPriority:
    """``wait_quiet`` before dispatching an invocation: it returns once no request is open at the API
    (``requests_open``, checked every ``poll_s`` while someone waits), or after ``max_hold_s``."""

    def __init__(
        self, requests_open: Callable[[], int], *, poll_s: float = 0.005, max_hold_s: float = STATE_TIMEOUT_MARGIN_S / 2
    ) -> None:
        self.requests_open = requests_open
        self.poll_s = poll_s
        self.max_hold_s = max_hold_s
        self.invocations = 0
        self.held: list[float] = []  #: seconds waited by each invocation that found the API busy
        self._lock = threading.Lock()
        self._waiting = 0
        self._wake = threading.Event()  #: someone waits: the watcher polls until the API is quiet
        self._quiet = threading.Event()  #: what held invocations wait on: one wake-up each
        threading.Thread(target=self._watch, name="front-door-quiet", daemon=True).start()

    def wait_quiet(self) -> float:
        """Block until the API is quiet, or for ``max_hold_s``: the seconds held."""
        start = time.monotonic()
        with self._lock:
            self.invocations += 1
            closed = self.requests_open() > 0
            if closed:
                self._waiting += 1
                self._quiet.clear()
                self._wake.set()
        if not closed:
            return 0.0
        self._quiet.wait(self.max_hold_s)
        held = time.monotonic() - start
        with self._lock:
            self._waiting -= 1
            self.held.append(held)
        return held

    def summary(self) -> str:
        """One line for serve's exit: how many invocations found the API busy, and how long they waited."""
        with self._lock:
            held, total = sorted(self.held), self.invocations
        line = f"front door first: {len(held)} of {total} invocations held"
        if held:
            p95 = held[min(len(held) - 1, int(0.95 * len(held)))]
            at_bound = sum(1 for h in held if h >= self.max_hold_s)
            line += (
                f" (p95 {p95 * 1000:.0f} ms, max {held[-1] * 1000:.0f} ms; "
                f"{at_bound} let go by the {self.max_hold_s:g} s bound)"
            )
        return line

    def _watch(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(self.poll_s)
            with self._lock:
                if not self._waiting:
                    self._wake.clear()
                elif self.requests_open() <= 0:
                    self._quiet.set()
                    self._wake.clear()


class PriorityGate:
    """At most ``slots`` holders at once; when one leaves, the longest-waiting *first* caller goes
    next, except that a *second* caller goes when ``first_turns`` first callers in a row have gone
    ahead of it, or when it has waited ``max_wait_s``. So the second class keeps a share of the
    turns however many first callers come (clients that ignore ``Retry-After`` and POST again at
    once must not starve the running jobs), and no second caller waits much past the bound.
    Waiters block on their own event: no thread spins or contends for the interpreter lock."""

    def __init__(
        self, slots: int = 1, max_wait_s: float = 2.0, first_turns: int = 3, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_wait_s = max_wait_s
        self.first_turns = first_turns
        self._in_a_row = 0  #: first callers that went while a second one waited
        self._clock = clock
        self._free = slots
        self._lock = threading.Lock()
        self._first: collections.deque[tuple[float, threading.Event]] = collections.deque()
        self._second: collections.deque[tuple[float, threading.Event]] = collections.deque()
        self.entered = {True: 0, False: 0}  #: calls of each class so far
        self.let_go = 0  #: second-class calls that went ahead of a waiting first one (their share or the bound)

    def enter(self, first: bool) -> None:
        with self._lock:
            self.entered[first] += 1
            if self._free > 0 and not self._first and not self._second:
                self._free -= 1
                return
            turn = threading.Event()
            (self._first if first else self._second).append((self._clock(), turn))
        turn.wait()  # the slot is handed over with the event (see leave)

    def waiting(self) -> int:
        with self._lock:
            return len(self._first) + len(self._second)

    def leave(self) -> None:
        with self._lock:
            second_due = self._second and (
                self._in_a_row >= self.first_turns or self._clock() - self._second[0][0] >= self.max_wait_s
            )
            if self._first and not second_due:
                self._in_a_row += bool(self._second)
                self._first.popleft()[1].set()
            elif self._second:
                self.let_go += bool(self._first)
                self._in_a_row = 0
                self._second.popleft()[1].set()
            else:
                self._free += 1


class FrontDoorCallsFirst:
    """WSGI middleware in front of moto: one AWS call at a time, the api function's first (it signs
    with ``api_access_key_id``). A Lambda Invoke is not gated: it holds its request for the whole
    run of the function, whose own calls pass the gate."""

    def __init__(self, app: Callable[..., Any], api_access_key_id: str, *, max_wait_s: float = 2.0) -> None:
        self.app = app
        self.gate = PriorityGate(slots=1, max_wait_s=max_wait_s)
        self._credential = f"Credential={api_access_key_id}/"

    def is_front_door(self, environ: dict[str, Any]) -> bool:
        return self._credential in environ.get("HTTP_AUTHORIZATION", "")

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "").endswith("/invocations"):
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        self.gate.enter(first=self.is_front_door(environ))
        try:
            return self.app(environ, start_response)  # type: ignore[no-any-return]
        finally:
            self.gate.leave()

    def summary(self) -> str:
        """One line for serve's exit: the calls of each class, and how often the bound let one go."""
        gate = self.gate
        return (
            f"front door first: moto served {gate.entered[True]} calls of the api function first, "
            f"{gate.entered[False]} of the functions and the state machine after them "
            f"({gate.let_go} went ahead of a waiting one: one turn in {gate.first_turns + 1}, or after "
            f"{gate.max_wait_s:g} s)"
        )
