"""A provider key's quotas, as providers enforce them at admission: the fake model refuses beyond them with 429.

Two kinds a new team's key starts with:

- **requests at once** (Moonshot's tier 0 allows 1; many providers cap a key's concurrent requests): a request
  that would be the ``max_open + 1``-th open one is refused at once;
- **tokens per minute counted at admission** (OpenAI's and Azure's way): a request reserves its prompt tokens
  plus its ``max_tokens`` when it is admitted, whatever it then writes; one whose reservation would take the
  last minute's over the quota is refused, with ``Retry-After`` until enough of the minute has passed.

The minute is ``minute_s`` long, so a test can scale it down as it scales the ladder.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

#: What a request reserves when it names no ``max_tokens`` (OpenAI counts the model's own maximum).
DEFAULT_MAX_TOKENS = 4096


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused, and when to come back (seconds)."""

    reason: str  #: ``requests_at_once`` or ``tokens_per_minute``
    retry_after_s: float

    def body(self) -> dict[str, Any]:
        """The error document, in OpenAI's shape (``rate_limit_exceeded``)."""
        what = "concurrent requests" if self.reason == "requests_at_once" else "tokens per min (TPM)"
        return {
            "error": {"message": f"Rate limit reached for {what}", "type": "requests", "code": "rate_limit_exceeded"}
        }


@dataclass
class KeyQuota:
    """The key's quotas (None: not capped) and what it admitted."""

    max_open: int | None = None
    tokens_per_minute: int | None = None
    minute_s: float = 60.0
    #: When a request refused for the requests at once is told to come back (a test scales it with the ladder).
    busy_retry_after_s: float = 1.0
    #: Every refusal: (the request's section, None for a whole recipe; the reason)
    refusals: list[tuple[str | None, str]] = field(default_factory=list)
    _open: int = 0
    _reserved: deque[tuple[float, int]] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, reservation: int, section: str | None) -> Refusal | None:
        """Admit one request reserving ``reservation`` tokens (it then holds a request until :meth:`done`), or
        say why not."""
        with self._lock:
            now = time.monotonic()
            while self._reserved and self._reserved[0][0] <= now - self.minute_s:
                self._reserved.popleft()
            refusal = self._refusal(reservation, now)
            if refusal is not None:
                self.refusals.append((section, refusal.reason))
                return refusal
            self._open += 1
            if self.tokens_per_minute is not None:
                self._reserved.append((now, reservation))
            return None

    def _refusal(self, reservation: int, now: float) -> Refusal | None:
        if self.max_open is not None and self._open >= self.max_open:
            return Refusal("requests_at_once", self.busy_retry_after_s)
        if self.tokens_per_minute is None:
            return None
        used = sum(n for _, n in self._reserved)
        if used + reservation <= self.tokens_per_minute:
            return None
        # The earliest moment enough of the minute has passed for this reservation to fit.
        freed, wait = used, self.minute_s
        for at, n in self._reserved:
            freed -= n
            if freed + reservation <= self.tokens_per_minute:
                wait = at + self.minute_s - now
                break
        return Refusal("tokens_per_minute", max(0.001, wait))

    def done(self) -> None:
        """An admitted request ended."""
        with self._lock:
            self._open -= 1


def reservation_of(body: dict[str, Any], prompt_tokens: int) -> int:
    """What a request reserves at admission: its prompt and the most it may write."""
    most = body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_MAX_TOKENS
    return prompt_tokens + int(most)


def retry_after_headers(refusal: Refusal) -> dict[str, str]:
    """``Retry-After`` in whole seconds, as the header allows (at least 1), and ``retry-after-ms`` exactly, as
    OpenAI sends both."""
    return {
        "Retry-After": str(max(1, math.ceil(refusal.retry_after_s))),
        "retry-after-ms": str(math.ceil(refusal.retry_after_s * 1000)),
    }
