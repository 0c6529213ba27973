"""The account's Lambda concurrency, as Lambda counts and throttles it (Lambda developer guide, "Lambda
function scaling" and "Configuring reserved concurrency"):

* every invocation in progress takes one unit of the account's concurrent-executions quota (1 000 by
  default; some new accounts get 10);
* a function with reserved concurrency runs at most that many at once, and no other function can use them;
* every other function shares what is left (the unreserved pool), and an invocation beyond it is throttled:
  a synchronous invoke fails with 429 ``TooManyRequestsException`` (the state machine sees
  ``Lambda.TooManyRequestsException`` and its Retry and Catch decide);
* a reservation may not leave the account fewer than 100 unreserved (all of it, on a quota under 100):
  the function's create or update fails.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from stack_template import ConfigError

#: Lambda refuses a reservation that would leave the account fewer unreserved concurrent executions than this.
MIN_UNRESERVED = 100
DEFAULT_QUOTA = 1000


def min_unreserved(quota: int) -> int:
    return min(MIN_UNRESERVED, quota)


class AccountConcurrency:
    """``acquire(function)`` before an invocation (False: throttled), ``release(function)`` after it."""

    def __init__(
        self, quota: int = DEFAULT_QUOTA, reserved: dict[str, int] | None = None, outside: Callable[[], int] = lambda: 0
    ) -> None:
        """``reserved``: function name -> its reserved concurrency; ``outside``: invocations this object does
        not start but that use the unreserved pool (the api function's requests open at ``serve``)."""
        self.quota, self.reserved = quota, dict(reserved or {})
        unreserved = quota - sum(self.reserved.values())
        if self.reserved and unreserved < min_unreserved(quota):
            raise ConfigError(
                f"reserving {sum(self.reserved.values())} leaves {unreserved} of the account's concurrency quota "
                f"{quota} unreserved; Lambda requires {min_unreserved(quota)} (the function's create fails: "
                '"decreases account\'s UnreservedConcurrentExecution below its minimum value")'
            )
        self.unreserved = unreserved
        self.outside = outside
        self.running: dict[str, int] = {}
        self.throttles: dict[str, int] = {}
        self.peak = 0
        self._lock = threading.Lock()

    def acquire(self, function: str) -> bool:
        with self._lock:
            if function in self.reserved:
                room = self.running.get(function, 0) < self.reserved[function]
            else:
                shared = sum(n for f, n in self.running.items() if f not in self.reserved) + self.outside()
                room = shared < self.unreserved
            if not room:
                self.throttles[function] = self.throttles.get(function, 0) + 1
                return False
            self.running[function] = self.running.get(function, 0) + 1
            self.peak = max(self.peak, sum(self.running.values()) + self.outside())
            return True

    def release(self, function: str) -> None:
        with self._lock:
            self.running[function] -= 1
