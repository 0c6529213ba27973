"""The one way a test waits for something: a bounded poll of an observable condition.

A test never sleeps for a fixed time and then asserts: on a busy 2-core machine a fixed sleep is
either too short (a flake) or pure waste. It polls what it is waiting for, and gives up with a
message that says what never happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class NeverHappened(AssertionError):
    """The condition did not hold within the bound."""


def wait_until(condition: Callable[[], T], *, timeout_s: float, what: str, interval_s: float = 0.02) -> T:
    """Poll ``condition`` until it returns something truthy and return that; fail after ``timeout_s``.

    The condition is checked once more after the bound, so a slow last poll still counts."""
    end = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= end:
            value = condition()
            if value:
                return value
            raise NeverHappened(f"{what}: not within {timeout_s:g} s")
        time.sleep(interval_s)
