"""What recipe calls measured, as the router and the job read it: each call's report (status, billed tokens,
what it says of its model's health) and the ``recipe`` stage's figures from the calls' records."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..resilience.calls import CallRecord, CallReport, Routed
from ..resilience.health import Observation
from ..schemas import RecipeMetrics
from ..upstream.chat_events import cached_prompt_tokens, token_count
from ..upstream.chat_reader import Completion
from .progress import CHARS_PER_TOKEN


def call_report(
    c: Completion,
    prompt_chars: int,
    status: int | None,
    valid: bool | None,
    *,
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
    """The ``recipe`` stage's measurements, made once from what the router returned: every call, and the stream
    figures of the answering model's last call (or of the last call made, when that model sent none)."""
    latest = routed.latest(routed.model)
    return billed(
        RecipeMetrics(
            attempts=routed.attempts,
            totalMs=routed.total_ms,
            model=routed.model,
            calls=list(routed.calls),
            **(_stream_figures(latest) if latest is not None else {}),
        )
    )


def billed(m: RecipeMetrics) -> RecipeMetrics:
    """``m`` with the stage's bill from its calls (``m.calls``): every call's tokens, those of the calls that
    wrote no recipe, the prompt tokens a prefix cache held; and the writing rate."""
    cached = [c.cachedPromptTokens for c in m.calls if c.cachedPromptTokens is not None]
    return m.model_copy(
        update={
            "tokensUsed": sum(c.tokens for c in m.calls),
            "cachedPromptTokens": sum(cached) if cached else None,
            "tokensWasted": sum(c.tokens for c in m.calls if c.outcome != "ok"),
            "tokensPerSecond": tokens_per_second(m),
        }
    )


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


def _stream_figures(record: CallRecord) -> dict[str, Any]:
    """The measurements of the latest call (a failed call's partial ones included)."""
    figures: dict[str, Any] = {"budgetMs": int(record.deadline.budget_ms), "boundBy": record.deadline.bound_by}
    c = record.report.completion
    if c is None:  # a call that failed before it read anything of its own (none here: every call reports)
        return figures
    figures |= {
        "firstByteMs": c.first_byte_ms,
        "firstContentMs": c.first_content_ms,
        "maxGapMs": c.max_gap_ms,
        "chunks": c.chunks,
        "finishReason": c.finish_reason,
        "outputChars": c.output_chars,
    }
    if c.usage:  # whatever a provider put there, only a count is kept
        figures |= {
            "promptTokens": token_count(c.usage.get("prompt_tokens")),
            "completionTokens": token_count(c.usage.get("completion_tokens")),
        }
    return figures
