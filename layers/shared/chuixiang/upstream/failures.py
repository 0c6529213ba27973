"""How a call to the model can fail, as types (in the style of ``httpx._exceptions``).

::

    UpstreamError
    ├── ConnectFailed          refused / unreachable: the upstream did no work  (transient)
    ├── ConnectionDropped      reset or closed early; transient before any byte of an answer
    ├── StatusError            an HTTP error status; transient for 5xx and 429
    ├── UpstreamTimeout        a limit ran out (never transient: it used its whole time)
    │   ├── FirstContentTimeout  no text from the model within the first-content limit
    │   ├── IdleTimeout        silence longer than the idle / read limit
    │   └── DeadlineExceeded   the attempt's deadline (total, Lambda time left, job deadline)
    ├── CircuitOpen            the model's breaker is open: no request was sent
    ├── Cancelled              nobody will read the answer any more (the job moved on): the call was closed
    ├── StreamError            an ``error`` object or undecodable data in the stream
    ├── CredentialsEchoed      the answer held the key in some encoding: a provider or proxy echo
    ├── InvalidAnswer          an answer that is not what was asked for
    │   └── AnswerTooLarge     over a byte, chunk or character cap
    └── EmptyAnswer            no content at all (e.g. reasoning only)

The generation layer maps these to job error codes in one table
(``chuixiang.generation.stage``). A failure is immutable once made; :meth:`UpstreamError.evolve` makes
a changed copy. :attr:`UpstreamError.unhealthy` says whether a failure counts against the model's
health (its circuit breaker, and moving on to a fallback model): the model could
not serve now, and nothing of an answer had started.
"""

from __future__ import annotations

import json
import re
from email.utils import parsedate_to_datetime
from typing import Any, Self

import httpx

from ..clock import now_utc
from ..redaction import redact


class UpstreamError(Exception):
    """An upstream call gave no usable answer. ``detail`` is internal (logs, the job item)."""

    kind = "upstream"  #: short name used in logs and details
    outcome = "error"  #: what ``metrics.*.calls[].outcome`` says

    _frozen = False

    def __init__(
        self,
        detail: str,
        *,
        content_started: bool = False,
        bytes_received: int = 0,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        detail = redact(detail)  # the one place upstream text becomes a detail: logs, job items, history
        super().__init__(detail)
        self.detail = detail
        self.content_started = content_started  #: the model had begun writing text
        self.bytes_received = bytes_received  #: body bytes received before the failure
        self.status = status
        self.retry_after_s = retry_after_s
        self._frozen = True

    def __setattr__(self, name: str, value: Any) -> None:
        # What decides a retry or a fallback cannot change once the failure is raised; Python itself still
        # sets the traceback and the cause.
        if self._frozen and not name.startswith("__"):
            raise AttributeError(f"{type(self).__name__} is immutable; use evolve()")
        super().__setattr__(name, value)

    def _fields(self) -> dict[str, Any]:
        return {
            "content_started": self.content_started,
            "bytes_received": self.bytes_received,
            "status": self.status,
            "retry_after_s": self.retry_after_s,
        }

    def evolve(self, **changes: Any) -> Self:
        """A copy with ``changes`` (raise it ``from`` this one, so the first cause stays in the traceback)."""
        return type(self)(self.detail, **{**self._fields(), **changes})

    @property
    def transient(self) -> bool:
        """The upstream plainly did not do the work, so another attempt may succeed."""
        return False

    @property
    def unhealthy(self) -> bool:
        """The model could not serve now (and nothing had started): a breaker failure, a reason to fall back."""
        return False

    @property
    def quota(self) -> bool:
        """The provider refused the call for the key's quota (HTTP 429: requests at once, tokens or requests per
        minute): the key is full, the model is not down. Never a breaker failure."""
        return self.status == 429

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


class ConnectFailed(UpstreamError):
    kind = "connect"
    outcome = "connect_failed"

    @property
    def transient(self) -> bool:
        return True

    @property
    def unhealthy(self) -> bool:
        return True


class ConnectionDropped(UpstreamError):
    kind = "reset"
    outcome = "connection_dropped"

    @property
    def transient(self) -> bool:
        return self.bytes_received == 0

    @property
    def unhealthy(self) -> bool:
        return not self.content_started


class StatusError(UpstreamError):
    kind = "status"
    outcome = "http_error"

    @property
    def transient(self) -> bool:
        return self.status is not None and (self.status >= 500 or self.status == 429)

    @property
    def unhealthy(self) -> bool:
        return self.transient

    @property
    def client_error(self) -> bool:
        """4xx other than 429: the request itself is refused (key, model name); trying again won't help."""
        return self.status is not None and 400 <= self.status < 500 and self.status != 429

    def __init__(self, detail: str, *, param: str | None = None, **kw: Any) -> None:
        #: The request field the upstream named as unknown or unsupported (a 400 saying so), if any.
        self.param = param
        super().__init__(detail, **kw)

    def _fields(self) -> dict[str, Any]:
        return {**super()._fields(), "param": self.param}

    @classmethod
    def from_response(cls, response: httpx.Response, body: bytes) -> StatusError:
        """The status and the start of the error body (redacted as every detail is: some servers echo
        the key, which its endpoint registered)."""
        text = redact(body.decode("utf-8", "replace"))  # before the cut: a halved key is still a key
        return cls(
            f"HTTP {response.status_code}: {text[:300]}",
            status=response.status_code,
            retry_after_s=retry_after_of(response.headers),
            param=refused_param(text) if 400 <= response.status_code < 500 else None,
        )


class UpstreamTimeout(UpstreamError):
    kind = "timeout"
    outcome = "timeout"


class FirstContentTimeout(UpstreamTimeout):
    outcome = "first_content_timeout"

    @property
    def unhealthy(self) -> bool:
        return True


class IdleTimeout(UpstreamTimeout):
    outcome = "idle_timeout"


class DeadlineExceeded(UpstreamTimeout):
    outcome = "deadline"


class CircuitOpen(UpstreamError):
    kind = "breaker_open"
    outcome = "breaker_open"

    @property
    def unhealthy(self) -> bool:
        return True


class Cancelled(UpstreamError):
    """The job stopped running this stage (stopped, timed out by the workflow, failed by the reconciler), so the
    call was closed: neither transient nor the model's fault (no retry, no fallback, no breaker record)."""

    kind = "cancelled"
    outcome = "cancelled"


class StreamError(UpstreamError):
    kind = "stream_error"
    outcome = "stream_error"


class CredentialsEchoed(UpstreamError):
    """The answer held the key in some encoding: a provider or a proxy echoed the request. Nothing of it is kept,
    and it is no recipe (the cache would serve it to every later requester of the dish)."""

    kind = "echo"
    outcome = "credentials_echoed"


class InvalidAnswer(UpstreamError):
    kind = "invalid"
    outcome = "invalid"


class AnswerTooLarge(InvalidAnswer):
    kind = "cap"
    outcome = "too_large"


class EmptyAnswer(UpstreamError):
    kind = "empty"
    outcome = "empty"


#: "Unknown parameter: 'x'" (OpenAI), "Unrecognized request argument supplied: x" (Azure), "unsupported field x"…
_UNKNOWN_PARAM = re.compile(
    r"""(?i)(?:unknown|unrecognized|unsupported|unexpected|invalid)[ _](?:request[ _])?"""
    r"""(?:parameter|argument|field)s?(?: supplied)?[:\s]+['"`]?([A-Za-z_][\w.\[\]]*)"""
)


def refused_param(body: str) -> str | None:
    """The request field a 4xx body says is unknown: OpenAI's ``error.param`` with ``unknown_parameter``
    / ``unsupported_parameter``, or the wording most gateways use ("Unknown parameter: 'x'")."""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict) and isinstance(error.get("param"), str) and "param" in str(error.get("code", "")):
        return str(error["param"])
    match = _UNKNOWN_PARAM.search(body)
    return match.group(1) if match else None


#: Millisecond forms a provider may send beside ``Retry-After`` (OpenAI's and Anthropic's SDKs read the first,
#: Azure sends the second): a quota that frees in 300 ms is not made to wait a whole second.
RETRY_AFTER_MS_HEADERS = ("retry-after-ms", "x-ms-retry-after-ms")


def retry_after_of(headers: httpx.Headers) -> float | None:
    """When the upstream said to come back, in seconds: a milliseconds header first, else ``Retry-After``."""
    for name in RETRY_AFTER_MS_HEADERS:
        try:
            return max(0.0, float(headers[name]) / 1000)
        except (KeyError, ValueError):
            continue
    return retry_after_seconds(headers.get("retry-after"))


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, (parsedate_to_datetime(value) - now_utc()).total_seconds())
    except (TypeError, ValueError):
        return None
