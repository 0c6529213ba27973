"""Generate a recipe: stream the model within the budget, retry only early transient failures.

A timeout is ``RECIPE_TIMEOUT``; HTTP errors, refused or dropped connections and
``error`` objects are ``RECIPE_UPSTREAM_ERROR``; output with no content
(reasoning only) is ``RECIPE_EMPTY``; truncation at ``length``, broken JSON or a
failed validation is ``RECIPE_INVALID``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import httpx

from ..deadline import Budget
from ..errors import StageError
from ..resilience.health import Observation
from ..resilience.retry import RetryPolicy
from ..resilience.router import CallContext, CallRecord, CallReport, Reply, Routed, Router, Routes
from ..schemas import RecipeMetrics
from ..settings import Settings
from ..timeouts import RECIPE_FIRST_CONTENT, RECIPE_IDLE, RECIPE_MIN_ATTEMPT, RECIPE_RETRY_WINDOW, RECIPE_TOTAL
from ..upstream.chat import (
    ChatRequest,
    Completion,
    SSEReader,
    StreamLimits,
    cached_prompt_tokens,
    chat_call,
    token_count,
)
from ..upstream.dialects import Dialect, dialect_for
from ..upstream.endpoint import ModelEndpoint
from ..upstream.failures import EmptyAnswer, FirstContentTimeout, InvalidAnswer, UpstreamError
from ..upstream.transport import Cancellation
from .progress import CHARS_PER_TOKEN, ProgressReporter
from .recipe_format import SYSTEM_PROMPT, Recipe, parse_recipe, strip_reasoning
from .stage import Generation, generate, stage_error

T = TypeVar("T")


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
            ),
            max_tokens=settings.recipe_max_tokens,
            dialects=settings.model_dialects,
        )


#: What a recipe generation returns: the recipe or its error, and the measurements of the job's ``recipe`` stage.
RecipeOutcome = Generation[Recipe, RecipeMetrics]


def whole_messages(dish: str) -> list[dict[str, str]]:
    """The recipe request's messages: the whole recipe in one answer."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": f"菜名：{dish}"}]


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


def to_recipe(completion: Completion) -> Recipe:
    """Turn a finished completion into a recipe or a classified failure."""
    return to_answer(with_thinking(completion), parse_recipe)


@dataclass(frozen=True)
class AnswerRequest(Generic[T]):
    """What one streamed call asks (its messages and extra headers) and how its text becomes a value."""

    messages: list[dict[str, str]]
    parse: Callable[[str], T]
    headers: dict[str, str] = field(default_factory=dict)
    #: Whether the call writes alone, so its speed is one stream's (a section's is not: it shares the key)
    alone: bool = True

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
                chat_payload(context.model, request.messages, limits.max_tokens, dialect),
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
        if not self.context.first_text():  # the other call of a hedge race wrote first
            return
        if self.watch is not None:
            self.watch(reader)
        if self.wrote is not None:
            self.wrote(self.context.model)


def _passed_on(stop: Cancellation, to: Cancellation) -> Callable[[], None]:
    return lambda: to.cancel(stop.reason)


def generate_recipe(
    client: httpx.Client,
    endpoint: ModelEndpoint,
    limits: RecipeLimits,
    dish: str,
    budget: Budget,
    routes: Routes | None = None,
    progress: ProgressReporter | None = None,
) -> RecipeOutcome:
    """Stream a recipe over ``routes`` (default: ``endpoint.model`` alone; see :class:`Router` for fallbacks,
    breakers, health, fastest first and the hedge); ``progress`` watches each call's stream, and follows the
    one that writes first when a hedge races two."""
    request = AnswerRequest(whole_messages(dish), parse_recipe)
    call = answer_call(
        client,
        endpoint,
        limits,
        request,
        watch=progress.watch if progress else None,
        # Closed when the job stops running this stage (a hedge race's loser is closed by the router).
        stops=(progress.cancellation,) if progress else (),
    )
    routed = generate(recipe_router(routes or Routes((endpoint.model,)), limits), call, budget)
    return Generation(routed.result, stage_error("RECIPE", routed.failure), recipe_metrics(routed))


def recipe_router(routes: Routes, limits: RecipeLimits) -> Router:
    """The recipe stage's router over ``routes``: its retry rule, each attempt within the total limit."""
    return Router(
        routes, limits.retry, "chat.completions", attempt_limit_ms=limits.total_ms, lease_s=limits.total_ms / 1000
    )


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
                value, report=call_report(completion, prompt_chars, completion.http_status, True, None, request.alone)
            )
        except UpstreamError as invalid:
            report = call_report(completion, prompt_chars, completion.http_status, False, None, request.alone)
            return Reply(failure=invalid, report=report)
    waited_ms = limits.stream.first_content_s * 1000 if isinstance(failure, FirstContentTimeout) else None
    report = call_report(completion, prompt_chars, None, None, waited_ms, request.alone)
    if failure.status == 429 and report.observation is not None:  # the key's limit: auto writes whole a while
        report = replace(report, observation=replace(report.observation, rate_limited=True))
    return Reply(failure=failure, report=report)


def call_report(
    c: Completion,
    prompt_chars: int,
    status: int | None,
    valid: bool | None,
    waited_ms: float | None,
    alone: bool = True,
) -> CallReport:
    """What one recipe call reports to the router: its status, its billed tokens, its model's health (the
    writing speed only of a call that wrote ``alone``)."""
    prompt, written = billed_tokens(c, prompt_chars)
    cached = cached_prompt_tokens(c.usage) if c.http_status == 200 else None
    seen = observation(c, written, valid, waited_ms)
    if not alone:
        seen = replace(seen, tokens_per_s=None)
    return CallReport(status, prompt, written, seen, cached, completion=c)


def recipe_metrics(routed: Routed[Any]) -> RecipeMetrics:
    """The ``recipe`` stage's measurements: every call, and the stream figures of the answering model's last
    call (or of the last call made, when that model sent none)."""
    metrics = RecipeMetrics(
        attempts=routed.attempts, totalMs=routed.total_ms, model=routed.model, calls=list(routed.calls)
    )
    latest = routed.latest(routed.model)
    if latest is not None:
        _fill(metrics, latest)
    count_tokens(metrics)
    return metrics


def count_tokens(m: RecipeMetrics) -> None:
    """The stage's bill from its calls (``m.calls``): every call's tokens, those of the calls that wrote no
    recipe, the prompt tokens a prefix cache held; and the writing rate."""
    m.tokensUsed = sum(c.tokens for c in m.calls)
    cached = [c.cachedPromptTokens for c in m.calls if c.cachedPromptTokens is not None]
    m.cachedPromptTokens = sum(cached) if cached else None
    m.tokensWasted = sum(c.tokens for c in m.calls if c.outcome != "ok")
    m.tokensPerSecond = tokens_per_second(m)


#: Fewer tokens than this say little of a writing speed (the first ones come in a burst).
SPEED_MIN_TOKENS = 50


def observation(c: Completion, tokens: int | None, valid: bool | None, waited_ms: float | None) -> Observation:
    """What one call says of its model: when it started writing (at least ``waited_ms`` when it gave up
    waiting), how fast it wrote (once it wrote :data:`SPEED_MIN_TOKENS` or more), whether its answer was a
    recipe."""
    speed = None
    if tokens and tokens >= SPEED_MIN_TOKENS and c.first_content_ms is not None and c.total_ms > c.first_content_ms:
        speed = tokens / ((c.total_ms - c.first_content_ms) / 1000)
    first = c.first_content_ms if c.first_content_ms is not None else (int(waited_ms) if waited_ms else None)
    return Observation(first_content_ms=first, tokens_per_s=speed, valid=valid)


def billed_tokens(c: Completion, prompt_chars: int) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens of one call, as the provider will bill it: its usage when it sent one,
    else estimated from the characters. A call the model refused or never answered (no 200) bills nothing."""
    if c.http_status != 200:
        return None, None
    usage = c.usage or {}
    prompt = token_count(usage.get("prompt_tokens"))
    written = token_count(usage.get("completion_tokens"))
    if prompt is None:
        prompt = round(prompt_chars / CHARS_PER_TOKEN)
    if written is None:
        written = round(c.output_chars / CHARS_PER_TOKEN)
    return prompt, written


def tokens_per_second(m: RecipeMetrics) -> float | None:
    """The writing rate: tokens (the provider's count, else estimated from the characters, as a failed
    call reports no usage) over the time from the first content to the end."""
    tokens = m.completionTokens or (round(m.outputChars / CHARS_PER_TOKEN) if m.outputChars else None)
    if not tokens or m.firstContentMs is None or m.totalMs <= m.firstContentMs:
        return None
    return round(tokens / ((m.totalMs - m.firstContentMs) / 1000), 1)


def _fill(metrics: RecipeMetrics, record: CallRecord) -> None:
    """The measurements of the latest call (a failed call's partial ones included)."""
    metrics.budgetMs = int(record.deadline.budget_ms)
    metrics.boundBy = record.deadline.bound_by
    c = record.report.completion
    if c is None:  # a call that failed before it read anything of its own (none here: every call reports)
        return
    metrics.firstByteMs = c.first_byte_ms
    metrics.firstContentMs = c.first_content_ms
    metrics.maxGapMs = c.max_gap_ms
    metrics.chunks = c.chunks
    metrics.finishReason = c.finish_reason
    metrics.outputChars = c.output_chars
    if c.usage:  # whatever a provider put there, only a count is kept
        metrics.promptTokens = token_count(c.usage.get("prompt_tokens"))
        metrics.completionTokens = token_count(c.usage.get("completion_tokens"))
