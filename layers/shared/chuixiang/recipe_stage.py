"""The recipe stage: stream the model within the budget, retry only early transient failures.

Classification (DESIGN §5): a timeout is ``RECIPE_TIMEOUT``; HTTP errors, refused
or dropped connections and ``error`` objects are ``RECIPE_UPSTREAM_ERROR``;
output with no content (reasoning only) is ``RECIPE_EMPTY``; truncation at
``length``, broken JSON or a failed validation is ``RECIPE_INVALID``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from .chat_stream import Completion, read_chat_completion
from .deadline import Budget, Deadline
from .errors import ErrorCode, StageError
from .ladder_rules import TYPICAL_ATTEMPT_FRACTION
from .models import RecipeMetrics
from .observability import logger
from .recipe import SYSTEM_PROMPT, Recipe, parse_recipe
from .settings import Settings
from .upstream import UpstreamFailure, decide_retry

MAX_ATTEMPTS = 2  #: one retry at most (DESIGN §4)
BASE_BACKOFF_S = 0.5

_KIND_TO_CODE = {
    "timeout": ErrorCode.RECIPE_TIMEOUT,
    "connect": ErrorCode.RECIPE_UPSTREAM_ERROR,
    "reset": ErrorCode.RECIPE_UPSTREAM_ERROR,
    "status": ErrorCode.RECIPE_UPSTREAM_ERROR,
    "stream_error": ErrorCode.RECIPE_UPSTREAM_ERROR,
    "invalid": ErrorCode.RECIPE_INVALID,
    "cap": ErrorCode.RECIPE_INVALID,
    "empty": ErrorCode.RECIPE_EMPTY,
}


@dataclass
class RecipeOutcome:
    recipe: Recipe | None
    error: StageError | None
    metrics: RecipeMetrics


def chat_payload(settings: Settings, dish: str) -> dict[str, Any]:
    return {
        "model": settings.recipe_model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": settings.recipe_max_tokens,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"菜名：{dish}"},
        ],
    }


def to_recipe(completion: Completion) -> Recipe:
    """Turn a finished completion into a recipe or a classified failure."""
    if not completion.content.strip():
        why = "reasoning only" if completion.reasoning_chars else "no content"
        raise UpstreamFailure("empty", f"{why} (finish_reason={completion.finish_reason})")
    if completion.finish_reason == "length":
        raise UpstreamFailure("invalid", f"cut short at max_tokens after {len(completion.content)} chars")
    try:
        return parse_recipe(completion.content)
    except StageError as exc:
        raise UpstreamFailure("invalid", exc.detail) from None


def generate_recipe(
    client: httpx.Client,
    settings: Settings,
    dish: str,
    budget: Budget,
    api_key: str | None,
) -> RecipeOutcome:
    url = settings.model_base_url.rstrip("/") + "/chat/completions"
    headers = {"Accept": "text/event-stream"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    payload = chat_payload(settings, dish)
    metrics = RecipeMetrics()
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        deadline = budget.attempt(settings.recipe_total_timeout_ms)
        attempt_start = time.monotonic()
        completion: Completion | None = None
        try:
            completion = read_chat_completion(
                client, url, payload, headers,
                idle_s=settings.recipe_idle_timeout_ms / 1000,
                deadline=deadline,
                max_chunks=settings.recipe_max_tokens * 4,
            )
            recipe = to_recipe(completion)
        except UpstreamFailure as failure:
            completion = completion or failure.partial
            elapsed_ms = (time.monotonic() - attempt_start) * 1000
            decision = decide_retry(
                failure,
                attempt=attempt,
                max_attempts=MAX_ATTEMPTS,
                elapsed_ms=elapsed_ms,
                window_ms=settings.recipe_retry_window_ms,
                remaining_ms=budget.remaining_ms(),
                needed_ms=settings.recipe_total_timeout_ms * TYPICAL_ATTEMPT_FRACTION,
                base_backoff_s=BASE_BACKOFF_S,
            )
            _log_call(attempt, elapsed_ms, failure.status, failure, deadline.bound_by, decision.reason)
            _fill(metrics, attempt, started, completion, deadline)
            if decision.retry:
                time.sleep(decision.wait_s)
                continue
            code = _KIND_TO_CODE[failure.kind]
            retryable = not (failure.kind == "status" and failure.status is not None
                             and 400 <= failure.status < 500 and failure.status != 429)
            return RecipeOutcome(None, StageError(code, str(failure), retryable=retryable), metrics)
        _log_call(attempt, (time.monotonic() - attempt_start) * 1000, completion.http_status, None,
                  deadline.bound_by, "ok")
        _fill(metrics, attempt, started, completion, deadline)
        return RecipeOutcome(recipe, None, metrics)


def _fill(metrics: RecipeMetrics, attempt: int, started: float, c: Completion | None, deadline: Deadline) -> None:
    metrics.attempts = attempt
    metrics.totalMs = int((time.monotonic() - started) * 1000)
    metrics.budgetMs = int(deadline.budget_ms)
    metrics.boundBy = deadline.bound_by
    if c is None:
        return
    metrics.firstByteMs = c.first_byte_ms
    metrics.firstContentMs = c.first_content_ms
    metrics.maxGapMs = c.max_gap_ms
    metrics.chunks = c.chunks
    metrics.finishReason = c.finish_reason
    if c.usage:
        metrics.promptTokens = c.usage.get("prompt_tokens")
        metrics.completionTokens = c.usage.get("completion_tokens")


def _log_call(attempt: int, elapsed_ms: float, status: int | None, failure: UpstreamFailure | None,
              bound_by: str, decision: str) -> None:
    logger.info(
        "upstream call",
        extra={
            "upstream": "chat.completions",
            "attempt": attempt,
            "retry_count": attempt - 1,
            "duration_ms": round(elapsed_ms),
            "http_status": status,
            "timed_out": bool(failure and failure.kind == "timeout"),
            "failure": str(failure) if failure else None,
            "deadline_bound_by": bound_by,
            "decision": decision,
        },
    )
