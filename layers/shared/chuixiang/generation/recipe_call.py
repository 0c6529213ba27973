"""One recipe call as the router makes it: the request in the model's dialect, the stream followed, the
answer turned into a value or a classified failure, and the call's report.

A timeout is ``RECIPE_TIMEOUT``; HTTP errors, refused or dropped connections and ``error`` objects are
``RECIPE_UPSTREAM_ERROR``; output with no content (reasoning only) is ``RECIPE_EMPTY``; truncation at
``length``, broken JSON or a failed validation is ``RECIPE_INVALID``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import httpx

from ..errors import StageError
from ..resilience.calls import CallContext, Reply
from ..resilience.retry import RetryPolicy
from ..settings import Settings
from ..timeouts import RECIPE_FIRST_CONTENT, RECIPE_IDLE, RECIPE_MIN_ATTEMPT, RECIPE_RETRY_WINDOW, RECIPE_TOTAL
from ..upstream.chat import ChatRequest, chat_call
from ..upstream.chat_reader import Completion, SSEReader, StreamLimits
from ..upstream.dialects import Dialect, dialect_for
from ..upstream.endpoint import ModelEndpoint
from ..upstream.failures import CredentialsEchoed, EmptyAnswer, FirstContentTimeout, InvalidAnswer, UpstreamError
from ..upstream.watchdog import Cancellation
from .call_figures import call_report
from .recipe_format import strip_reasoning

T = TypeVar("T")


#: A whole recipe's call refused for the key's quota waits and asks again up to this many times, inside its budget
#: (a section's is not: the stage abandons its sections and writes whole on the stream the job holds).
QUOTA_ATTEMPTS = 20


@dataclass(frozen=True)
class RecipeLimits:
    """Everything that bounds one recipe generation, built once from the settings."""

    total_ms: float
    stream: StreamLimits
    retry: RetryPolicy
    max_tokens: int
    dialects: str = ""  #: the ``ModelDialects`` map (JSON)

    @classmethod
    def from_settings(cls, settings: Settings) -> RecipeLimits:
        return cls(
            total_ms=RECIPE_TOTAL.of(settings),
            stream=StreamLimits(
                first_content_s=RECIPE_FIRST_CONTENT.of(settings) / 1000,
                idle_s=RECIPE_IDLE.of(settings) / 1000,
                max_chunks=settings.recipe_max_tokens * 4,
            ),
            retry=RetryPolicy(
                max_attempts=2,
                window_ms=RECIPE_RETRY_WINDOW.of(settings),
                min_attempt_ms=RECIPE_MIN_ATTEMPT.of(settings),
                quota_attempts=QUOTA_ATTEMPTS,
            ),
            max_tokens=settings.recipe_max_tokens,
            dialects=settings.model_dialects,
        )


def chat_payload(
    model: str, messages: list[dict[str, str]], max_tokens: int, dialect: Dialect | None = None
) -> dict[str, Any]:
    """A recipe request (the whole recipe's messages, or one section's), in ``model``'s dialect."""
    dialect = dialect or dialect_for(model)
    payload: dict[str, Any] = {
        "model": model,
        "stream": dialect.stream,
        dialect.max_tokens_field: max_tokens,
        "messages": messages,
    }
    if dialect.stream and dialect.stream_usage:
        payload["stream_options"] = {"include_usage": True}
    if dialect.json_mode:
        payload["response_format"] = {"type": "json_object"}
    return {**payload, **dialect.extra}


def with_thinking(completion: Completion) -> Completion:
    """The completion with the ``<think>`` text some models write into their content counted as reasoning."""
    think_chars = strip_reasoning(completion.content)[1]
    return replace(completion, reasoning_chars=completion.reasoning_chars + think_chars) if think_chars else completion


def to_answer(completion: Completion, parse: Callable[[str], T]) -> T:
    """Turn a finished completion (``<think>`` counted: :func:`with_thinking`) into ``parse``'s value or a
    classified failure."""
    if completion.echoed:
        raise CredentialsEchoed("the provider's answer echoed the credentials: nothing of it is kept")
    content = strip_reasoning(completion.content)[0]
    if not content.strip():
        if completion.finish_reason == "length":
            raise EmptyAnswer(
                f"the token budget (max_tokens) went to reasoning: {completion.reasoning_chars} "
                "characters of reasoning, no content"
            )
        why = "reasoning only" if completion.reasoning_chars else "no content"
        raise EmptyAnswer(f"{why} (finish_reason={completion.finish_reason})")
    if completion.finish_reason == "length":
        raise InvalidAnswer(f"cut short at max_tokens after {len(content)} chars")
    try:
        return parse(content)
    except StageError as exc:
        raise InvalidAnswer(exc.detail) from exc


@dataclass(frozen=True)
class AnswerRequest(Generic[T]):
    """What one streamed call asks (its messages and extra headers) and how its text becomes a value."""

    messages: list[dict[str, str]]
    parse: Callable[[str], T]
    headers: dict[str, str] = field(default_factory=dict)
    #: Whether the call writes alone, so its speed is one stream's (a section's is not: it shares the key)
    alone: bool = True
    #: What the call asks for (None: ``RecipeMaxTokens``, a whole recipe's): a section asks for what it writes
    max_tokens: int | None = None

    @property
    def prompt_chars(self) -> int:
        """The prompt's characters (each message's few tokens of framing counted as four)."""
        return sum(len(m["content"]) + 4 for m in self.messages)


#: What follows a stage's streams: handed each call's reader when it starts, and again when it writes first in
#: a hedge race (a progress reporter reports on the last one handed).
Watch = Callable[[SSEReader], None]


def answer_call(
    client: httpx.Client,
    endpoint: ModelEndpoint,
    limits: RecipeLimits,
    request: AnswerRequest[T],
    *,
    watch: Watch | None = None,
    stops: tuple[Cancellation, ...] = (),
    wrote: Callable[[str], None] | None = None,
) -> Callable[[CallContext], Reply[T]]:
    """The router's call for ``request``: ``watch`` follows each call's stream; ``wrote`` is told the model of
    each call that writes (in a hedge race, the first to write); any of ``stops`` set closes the call in flight
    (the job stopped, a core section failed). Each call's report carries what it read."""
    url = endpoint.url("/chat/completions")
    headers = endpoint.headers(Accept="text/event-stream", **request.headers)

    def call(context: CallContext) -> Reply[T]:
        unlinks = [stop.listen(_passed_on(stop, context.cancellation)) for stop in stops]
        try:
            dialect = dialect_for(context.model, limits.dialects)
            chat = ChatRequest(
                url,
                chat_payload(context.model, request.messages, request.max_tokens or limits.max_tokens, dialect),
                limits.stream,
                headers,
                streamed=dialect.stream,
            )
            observer = _Following(context, watch, wrote)
            done = chat_call(client, chat, context.deadline, observer=observer, cancellation=context.cancellation)
            return _reply(done.completion, done.failure, limits, request)
        finally:
            for unlink in unlinks:
                unlink()

    return call


@dataclass(frozen=True)
class _Following:
    """The stream observer of one call: ``watch`` gets its reader at the start, and again when it writes first
    (in a hedge race, only if it is the first of the two); ``wrote`` hears which model writes."""

    context: CallContext
    watch: Watch | None
    wrote: Callable[[str], None] | None

    def started(self, reader: SSEReader) -> None:
        if self.watch is not None:
            self.watch(reader)

    def first_text(self, reader: SSEReader) -> None:
        if not self.context.claim_first_write():  # the other call of a hedge race wrote first
            return
        if self.watch is not None:
            self.watch(reader)
        if self.wrote is not None:
            self.wrote(self.context.model)


def _passed_on(stop: Cancellation, to: Cancellation) -> Callable[[], None]:
    return lambda: to.cancel(stop.reason)


def _reply(
    completion: Completion, failure: UpstreamError | None, limits: RecipeLimits, request: AnswerRequest[T]
) -> Reply[T]:
    """One call's answer turned into a value or a classified failure, with its report."""
    prompt_chars = request.prompt_chars
    if failure is None:
        completion = with_thinking(completion)
        try:
            value = to_answer(completion, request.parse)
            return Reply(
                value,
                report=call_report(
                    completion, prompt_chars, completion.http_status, True, waited_ms=None, alone=request.alone
                ),
            )
        except UpstreamError as invalid:
            report = call_report(
                completion, prompt_chars, completion.http_status, False, waited_ms=None, alone=request.alone
            )
            return Reply(failure=invalid, report=report)
    waited_ms = limits.stream.first_content_s * 1000 if isinstance(failure, FirstContentTimeout) else None
    report = call_report(completion, prompt_chars, None, None, waited_ms=waited_ms, alone=request.alone)
    if failure.status == 429 and report.observation is not None:  # the key's limit: auto writes whole a while
        report = replace(report, observation=replace(report.observation, rate_limited=True))
    return Reply(failure=failure, report=report)
