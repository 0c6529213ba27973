"""Fault scenarios for the recipe stage, run both on the stage alone and through the pipeline.

``limit`` names the template parameter whose value the give-up time must match
(never before it, at most ``LATE_S`` after it); it is read from the template.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stack_template import Template

from chuixiang_local.model.fake_model import ChatBehaviour as B

from .scaled import LATE_S


@dataclass
class Scenario:
    id: str
    script: list[B]
    code: str | None  #: None: the recipe succeeds
    requests: int
    limit: str | None = None  #: "RecipeFirstContentTimeoutMs", "RecipeIdleTimeoutMs" or "RecipeTotalTimeoutMs"
    retryable: bool | None = None
    tags: list[str] = field(default_factory=list)


SCENARIOS = [
    Scenario("normal_stream", [B()], None, 1),
    Scenario("early_503_then_success", [B(status=503), B()], None, 2),
    Scenario("early_429_retry_after_then_success", [B(status=429, retry_after="0.2"), B()], None, 2),
    Scenario("two_503s", [B(status=503), B(status=503)], "RECIPE_UPSTREAM_ERROR", 2),
    Scenario("503_after_retry_window", [B(status=503, headers_delay_s=0.8), B()], "RECIPE_UPSTREAM_ERROR", 1),
    Scenario("stall_before_headers", [B(headers_delay_s=30)], "RECIPE_TIMEOUT", 1, "RecipeFirstContentTimeoutMs"),
    Scenario(
        "keepalives_only_never_content",
        [B(stall_after_chunks=0, stall_s=30, keepalive_every_s=0.2)],
        "RECIPE_TIMEOUT",
        1,
        "RecipeFirstContentTimeoutMs",
    ),
    Scenario("stall_mid_stream", [B(stall_after_chunks=5, stall_s=30)], "RECIPE_TIMEOUT", 1, "RecipeIdleTimeoutMs"),
    Scenario("slow_drip_under_idle_over_total", [B(chunk_delay_s=0.25)], "RECIPE_TIMEOUT", 1, "RecipeTotalTimeoutMs"),
    Scenario(
        "keepalives_do_not_reset_idle",
        [B(stall_after_chunks=5, stall_s=30, keepalive_every_s=0.25)],
        "RECIPE_TIMEOUT",
        1,
        "RecipeIdleTimeoutMs",
    ),
    Scenario("reasoning_only", [B(kind="reasoning_only")], "RECIPE_EMPTY", 1),
    Scenario("error_object_mid_stream", [B(kind="error_mid")], "RECIPE_UPSTREAM_ERROR", 1),
    Scenario("truncated_at_length", [B(kind="length")], "RECIPE_INVALID", 1),
    Scenario("non_stream_json_answer", [B(kind="json")], None, 1),
    Scenario("eof_without_done", [B(kind="eof_no_done")], None, 1),
    Scenario("connection_reset_mid_stream", [B(kind="reset_mid"), B()], "RECIPE_UPSTREAM_ERROR", 1),
    Scenario("undecodable_sse_data", [B(kind="garbage")], "RECIPE_UPSTREAM_ERROR", 1),
    Scenario("unauthorized_401", [B(status=401), B()], "RECIPE_UPSTREAM_ERROR", 1, retryable=False),
]


def assert_give_up(elapsed_s: float, scenario: Scenario, template: Template, budget_ms: int | None = None) -> None:
    """Never before the limit, at most LATE_S after it. In a Lambda the total deadline may be cut
    shorter by the time left (a slow cold start); then the attempt's recorded budget is the limit."""
    if scenario.limit is None:
        return
    limit_s = template.number(scenario.limit) / 1000
    if scenario.limit == "RecipeTotalTimeoutMs" and budget_ms is not None:
        limit_s = min(limit_s, budget_ms / 1000)
    assert limit_s <= elapsed_s <= limit_s + LATE_S, f"gave up after {elapsed_s:.3f} s, limit {limit_s} s"
