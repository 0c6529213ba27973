"""Every limit of the timeout ladder, declared once, and the rules derived from them.

A :class:`Limit` says everything the rest of the system needs to know about one
limit: its template parameter, the environment variable and settings attribute
that carry it into a function, its unit and default, the value the tests scale it
down to, and which limit must enclose it. ``settings.py`` builds its fields from
these declarations, ``chuixiang ladder`` checks and prints them (``--markdown`` is
docs/ladder.md's table), and the tests' scaled parameter set is read from here, so none
of them repeats a number.

Adding a limit: declare it in :data:`LIMITS`, add the parameter (and the
environment variable of the function that uses it) to ``template.yaml``, and use
it. ``tests/runner/test_limits.py`` fails when the template and the declaration disagree.
"""

from __future__ import annotations

from .limit_rules import (
    FINISH_MARGIN_FRACTION,
    FINISH_MARGIN_MIN_MS,
    Limit,
    Margin,
    Unit,
)

RECIPE_FIRST_CONTENT = Limit(
    "RecipeFirstContentTimeoutMs",
    Unit.MS,
    60_000,
    "first content",
    "request → first delta carrying text (content or reasoning); SSE comments, empty deltas and "
    "role-only chunks prove the connection is alive, not that the model writes: they do not count",
    env="RECIPE_FIRST_CONTENT_TIMEOUT_MS",
    attr="recipe_first_content_timeout_ms",
    functions=("recipe", "canary"),
    scaled=1500,
    inside=("RecipeTotalTimeoutMs",),
    minimum=100,
)
RECIPE_IDLE = Limit(
    "RecipeIdleTimeoutMs",
    Unit.MS,
    30_000,
    "text idle",
    "longest gap between two text-carrying deltas once the model writes (same rule: keep-alives do not "
    "count); a silent socket is caught at the same limits",
    env="RECIPE_TEXT_IDLE_TIMEOUT_MS",
    attr="recipe_idle_timeout_ms",
    functions=("recipe", "canary"),
    scaled=1000,
    inside=("RecipeTotalTimeoutMs", "RecipeFirstContentTimeoutMs"),
    minimum=100,
)
RECIPE_TOTAL = Limit(
    "RecipeTotalTimeoutMs",
    Unit.MS,
    140_000,
    "stream total",
    "whole generation, per attempt; capped by the Lambda's time left "
    f"− max({FINISH_MARGIN_MIN_MS} ms, {FINISH_MARGIN_FRACTION:.0%}) and the job's `deadlineAt`",
    env="RECIPE_TEXT_TIMEOUT_MS",
    attr="recipe_total_timeout_ms",
    functions=("recipe", "canary"),
    scaled=3000,
    inside=("RecipeFunctionTimeout", "CanaryFunctionTimeout"),
    margin=Margin.FINISH,
    minimum=500,
)
RECIPE_RETRY_WINDOW = Limit(
    "RecipeRetryWindowMs",
    Unit.MS,
    20_000,
    "recipe retry window",
    "one same-model retry, only for a 5xx/429/refused/reset-before-data within this long of the request's "
    "start (the breaker's own DynamoDB calls not counted), before content",
    env="RECIPE_RETRY_WINDOW_MS",
    attr="recipe_retry_window_ms",
    functions=("recipe", "canary"),
    scaled=500,
    inside=("RecipeTotalTimeoutMs",),
    minimum=0,
)
RECIPE_MIN_ATTEMPT = Limit(
    "RecipeMinAttemptMs",
    Unit.MS,
    60_000,
    "minimum attempt",
    "no retry or fallback attempt starts with less budget left than this (the job then fails with the "
    "code of the last failure)",
    env="RECIPE_MIN_ATTEMPT_MS",
    attr="recipe_min_attempt_ms",
    functions=("recipe", "canary"),
    scaled=1000,
    inside=("RecipeTotalTimeoutMs",),
    minimum=0,
)
RECIPE_HEDGE_AFTER = Limit(
    "RecipeHedgeAfterMs",
    Unit.MS,
    20_000,
    "hedge after",
    "a model that has written nothing this long (or its measured p90 first content, if shorter) gets the next "
    "model raced against it: the first to write wins, the other is closed; one hedge per job, at most one job "
    "in five per endpoint and container; 0: never",
    env="RECIPE_HEDGE_AFTER_MS",
    attr="recipe_hedge_after_ms",
    functions=("recipe",),
    scaled=500,
    inside=("RecipeFirstContentTimeoutMs",),
    minimum=0,
)
PROGRESS_INTERVAL = Limit(
    "ProgressIntervalMs",
    Unit.MS,
    2_000,
    "progress interval",
    "at most one progress write (`progress`, `partial`) per interval while the recipe streams; inside the "
    "stream total, or no write would ever land. Every `pollAfterMs` is in proportion to it (the API's cadences "
    "are the default's)",
    env="PROGRESS_INTERVAL_MS",
    attr="progress_interval_ms",
    functions=("recipe", "api"),
    scaled=250,
    inside=("RecipeTotalTimeoutMs",),
    minimum=100,
)
RECIPE_FUNCTION = Limit(
    "RecipeFunctionTimeout",
    Unit.S,
    150,
    "recipe Lambda",
    "the recipe function's `Timeout`",
    env="RECIPE_FUNCTION_TIMEOUT",
    attr="recipe_function_timeout_s",
    functions=("submit",),
    scaled=5,
    inside_state="Recipe",
    minimum=2,
)
IMAGE_FUNCTION = Limit(
    "ImageFunctionTimeout",
    Unit.S,
    100,
    "image Lambda",
    "the image function's `Timeout`",
    env="IMAGE_FUNCTION_TIMEOUT",
    attr="image_function_timeout_s",
    functions=("submit",),
    scaled=5,
    inside_state="Image",
    minimum=2,
)
CANARY_FUNCTION = Limit(
    "CanaryFunctionTimeout",
    Unit.S,
    150,
    "canary Lambda",
    "the canary function's `Timeout`: each run probes every `CanaryModels` model at once, each attempt "
    "inside the recipe limits",
    scaled=5,
    timeout_of="canary",
    minimum=2,
)
SYNTHETIC_FUNCTION = Limit(
    "SyntheticFunctionTimeout",
    Unit.S,
    600,
    "synthetic Lambda",
    "the synthetic job's `Timeout`: it waits for its job as the client does (until `deadlineAt` and the safety "
    "margin), then confirms a failure with a second job if time is left",
    scaled=70,
    timeout_of="synthetic",
    minimum=2,
)
IMAGE_RETRY_WINDOW = Limit(
    "ImageRetryWindowMs",
    Unit.MS,
    15_000,
    "image retry window",
    "the image retries only a 5xx/429/refused within this long of the request's start "
    "(the breaker's own DynamoDB calls not counted; up to 3 attempts, each needing half the budget it started with)",
    env="IMAGE_RETRY_WINDOW_MS",
    attr="image_retry_window_ms",
    functions=("image",),
    scaled=500,
    inside=("ImageFunctionTimeout",),
    margin=Margin.FINISH,
    minimum=0,
)
STATE_MACHINE = Limit(
    "StateMachineTimeout",
    Unit.S,
    300,
    "state machine",
    "the whole execution; fixes each job's `deadlineAt` (execution start + this)",
    env="JOB_TIMEOUT_SECONDS",
    attr="job_timeout_s",
    functions=("*",),
    scaled=60,
    inside=("ClientGiveUpSeconds", "SyntheticFunctionTimeout"),
    margin=Margin.SAFETY,
    minimum=10,
)
BREAKER_THRESHOLD = Limit(
    "BreakerFailureThreshold",
    Unit.CALLS,
    3,
    "breaker threshold",
    "a model's breaker opens after this many consecutive health failures (5xx, 429, refused/reset, "
    "first-content limit), shared by every invocation",
    env="BREAKER_FAILURE_THRESHOLD",
    attr="breaker_failure_threshold",
    functions=("recipe", "image"),
)
BREAKER_RECOVERY = Limit(
    "BreakerRecoverySeconds",
    Unit.S,
    60,
    "breaker recovery",
    "an open breaker sends no request for this long, then lets exactly one probe through",
    env="BREAKER_RECOVERY_SECONDS",
    attr="breaker_recovery_s",
    functions=("recipe", "image"),
    scaled=2,
)
CLIENT_GIVE_UP = Limit(
    "ClientGiveUpSeconds", Unit.S, 360, "client gives up", "documented: the mini-program stops polling after this"
)

LIMITS: tuple[Limit, ...] = (
    RECIPE_FIRST_CONTENT,
    RECIPE_IDLE,
    RECIPE_TOTAL,
    RECIPE_RETRY_WINDOW,
    RECIPE_MIN_ATTEMPT,
    RECIPE_HEDGE_AFTER,
    PROGRESS_INTERVAL,
    RECIPE_FUNCTION,
    IMAGE_FUNCTION,
    IMAGE_RETRY_WINDOW,
    CANARY_FUNCTION,
    SYNTHETIC_FUNCTION,
    STATE_MACHINE,
    CLIENT_GIVE_UP,
    BREAKER_THRESHOLD,
    BREAKER_RECOVERY,
)
BY_PARAMETER: dict[str, Limit] = {limit.parameter: limit for limit in LIMITS}


def scaled_parameters() -> dict[str, str]:
    """The scaled-down ladder the tests run (template parameter overrides)."""
    return {limit.parameter: str(limit.scaled) for limit in LIMITS if limit.scaled is not None}
