"""Pydantic models at every boundary: the API body, stage events, the job document."""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypedDict

from .dish import MAX_DISH_CHARS, normalize_dish
from .job_status import JobStage, JobStatus


class CreateRecipeRequest(BaseModel):
    """Body of ``POST /recipes``."""

    model_config = ConfigDict(extra="forbid")
    #: Validated up to 400 characters as sent (spaces a normalisation removes are forgiven); the published
    #: schema states the rule a client must follow: 1-40 characters.
    dish: str = Field(
        min_length=1,
        max_length=400,
        description=f"Dish name, 1-{MAX_DISH_CHARS} characters after normalisation",
        json_schema_extra={"maxLength": MAX_DISH_CHARS},
    )

    @field_validator("dish")
    @classmethod
    def _normalise(cls, value: str) -> str:
        return normalize_dish(value)


class CreateRecipeResponse(BaseModel):
    jobId: str
    status: JobStatus
    pollAfterMs: int
    deadlineAt: str | None = None


class ApiError(BaseModel):
    code: str
    message: str
    reason: str | None = None


class ErrorBody(BaseModel):
    error: ApiError


# --- stage events (what the state machine passes between Lambdas) -------------------------


class ExecutionInput(BaseModel):
    """What the api starts an execution with. During the api's gradual rollout (10 % for 5 minutes) the old
    api code starts the new state machine definition and the new code the old one: a change here must be one
    both definitions run (``tests/unit/test_rollout.py`` pins it)."""

    jobId: str
    dish: str


class SubmitEvent(BaseModel):
    jobId: str = Field(min_length=1, max_length=80)
    dish: Any
    executionStartTime: str | None = None


class SubmitResult(BaseModel):
    jobId: str
    dish: str | None = None
    valid: bool
    cached: bool = False
    deadlineAt: str | None = None
    error: dict[str, Any] | None = None
    stateTimeouts: dict[str, int] = Field(default_factory=dict)
    #: The admission slot the API took for this job (None: started without the API): the workflow frees it
    #: when the job ends, whoever polls.
    slot: int | None = None


class RecipeEvent(BaseModel):
    jobId: str
    dish: str
    deadlineAt: str | None = None


class StageFailure(BaseModel):
    code: str
    detail: str
    retryable: bool


class RecipeResult(BaseModel):
    ok: bool
    imagePrompt: str | None = None
    error: StageFailure | None = None


class ImageEvent(BaseModel):
    jobId: str
    dish: str | None = None
    imagePrompt: str
    deadlineAt: str | None = None


class ImageResult(BaseModel):
    ok: bool
    key: str | None = None
    error: StageFailure | None = None


class CanaryEvent(BaseModel):
    """What the schedule sends (its default input is ``{}``); a run by hand may name models and a dish."""

    model_config = ConfigDict(extra="ignore")
    models: list[str] | None = None  #: default: the function's ``CANARY_MODELS``
    dish: str = Field("番茄炒蛋", min_length=1, max_length=40)


class CanaryProbe(BaseModel):
    model: str
    valid: bool
    code: str | None = None
    firstContentMs: int | None = None
    totalMs: int
    tokensPerSecond: float | None = None


class CanaryResult(BaseModel):
    dish: str
    probes: list[CanaryProbe]


# --- the job document (GET /recipes/{jobId}) -----------------------------------------------


class UpstreamCall(BaseModel):
    """One call to a model: which, how long, how it ended (``ok``, ``http_error``, ``first_content_timeout``,
    ``idle_timeout``, ``deadline``, ``breaker_open`` (no request sent), …) and the HTTP status."""

    model: str
    ms: int
    outcome: str
    status: int | None = None
    #: What the call is billed: the provider's counts, else estimated from the characters (none when the
    #: model refused or never answered: providers do not bill those).
    promptTokens: int | None = None
    completionTokens: int | None = None
    #: Of ``promptTokens``, those the provider's prefix cache held (billed at a fraction), when it says.
    cachedPromptTokens: int | None = None
    #: The recipe section the call wrote (``RecipeSections=parallel``), absent for a whole recipe.
    section: str | None = None

    @property
    def tokens(self) -> int:
        return (self.promptTokens or 0) + (self.completionTokens or 0)


class SectionReport(BaseModel):
    """How one section of a recipe written in parallel went: when it started and ended in the stage (ms from
    the stage's start), the model that answered (or the last one tried) and how it ended: ``ok``, ``dropped``
    (a degradable section the recipe goes without), ``cancelled`` (closed when another core section failed
    first: the stage's error is that one's) or the stage's error code."""

    name: str
    core: bool
    startMs: int
    endMs: int
    model: str | None = None
    outcome: str
    firstContentMs: int | None = None


class RecipeMetrics(BaseModel):
    # Made once from what the router returned (``generation.call_figures``), copied with changes, never assigned
    # field by field.
    model_config = ConfigDict(frozen=True)

    attempts: int = 0  #: upstream requests made (over every model)
    model: str | None = None  #: the model that wrote the recipe (or the last one tried)
    calls: list[UpstreamCall] = Field(default_factory=list)
    firstByteMs: int | None = None
    firstContentMs: int | None = None
    maxGapMs: int | None = None
    chunks: int = 0
    totalMs: int = 0
    finishReason: str | None = None
    #: The last attempt's deadline: its length and the limit that set it (total / lambda / job).
    budgetMs: int | None = None
    boundBy: str | None = None
    promptTokens: int | None = None
    completionTokens: int | None = None
    outputChars: int | None = None  #: characters written (content and reasoning), a failed call's included
    #: Every call's tokens (the model bill of this stage), and those of the calls that did not write the recipe
    #: (failed attempts, cancelled streams, hedges that lost).
    tokensUsed: int = 0
    tokensWasted: int = 0
    #: Of the prompt tokens used, those the providers' prefix caches held (when they say).
    cachedPromptTokens: int | None = None
    #: The writing speed of the call that answered, as ``chuixiang bench`` and the model's health measure it.
    tokensPerSecond: float | None = None
    #: ``RecipeSections=parallel``: each section, and those dropped (the job's ``degraded``).
    sections: list[SectionReport] | None = None
    degraded: list[str] | None = None
    #: ``whole`` or ``parallel``: how the recipe was written, and why (``RecipeSections=auto`` chose it, or the
    #: setting fixed it; a merge that failed and was written again whole says so).
    mode: str | None = None
    modeReason: str | None = None
    #: ``modeReason`` in a word (``configured``, ``one_stream``, ``unmeasured``, ``predicted``, ``no_loan``): what
    #: the ``RecipeMode`` metric and the ``recipe-modes`` saved query group by.
    modeBasis: str | None = None
    #: In sections: why the parts did not merge into a recipe (it was then written whole, when time was left).
    mergeFailure: str | None = None
    #: Why a recipe begun in sections was written whole instead (``quota``, ``shape``, ``stall``, ``merge``: the
    #: sections failed as sections); None when the chosen mode ran to its end.
    wholeAfter: str | None = None


class ImageMetrics(BaseModel):
    attempts: int = 0
    totalMs: int = 0
    model: str | None = None
    calls: list[UpstreamCall] = Field(default_factory=list)


class JobMetrics(BaseModel):
    recipe: RecipeMetrics | None = None
    image: ImageMetrics | None = None


class ErrorInfo(BaseModel):
    code: str
    message: str
    retryable: bool


class ImageErrorInfo(BaseModel):
    code: str
    message: str


class ImageRef(BaseModel):
    url: str
    key: str


class PartialIngredient(TypedDict):
    name: str
    amount: NotRequired[str]


class PartialIngredients(TypedDict, total=False):
    main: list[PartialIngredient]
    auxiliary: list[PartialIngredient]
    seasoning: list[PartialIngredient]


class PartialStep(TypedDict):
    order: int
    text: str


class PartialRecipe(TypedDict, total=False):
    """The recipe fields that are complete in the stream so far (a ``BaseModel`` would refuse partial data);
    ``stepTitles`` only while a recipe written in sections has its outline and not all its steps."""

    name: str
    summary: str
    ingredients: PartialIngredients
    stepTitles: list[str]
    steps: list[PartialStep]


class Progress(BaseModel):
    """How far the model is while the recipe streams (``percent`` reaches 100 only once it validated)."""

    chars: int  #: characters written (content and reasoning) in the current attempt
    tokens: int  #: from the provider's usage when it reports any while streaming, else estimated from chars
    expectedTokens: int
    percent: int = Field(ge=0, le=100)
    etaMs: int | None = None  #: at the observed writing rate; None until the model has written a little
    updatedAt: str
    #: ``RecipeSections=parallel``: each section's state, ``waiting``, ``writing``, ``done`` or ``dropped``.
    sections: dict[str, str] | None = None


class JobDocument(BaseModel):
    jobId: str
    dish: str
    status: JobStatus
    stage: JobStage
    recipe: dict[str, Any] | None = None
    image: ImageRef | None = None
    imageError: ImageErrorInfo | None = None
    error: ErrorInfo | None = None
    createdAt: str
    updatedAt: str
    deadlineAt: str | None = None
    progress: Progress | None = None
    #: The recipe fields already complete in the stream (until ``recipe`` is there, which supersedes it).
    partial: PartialRecipe | None = None
    #: The degradable sections the recipe was served without (``extras``, ``imagePrompt``): absent when none.
    degraded: list[str] | None = None
    #: When to poll again (it follows the job: slower before the model writes, faster near the end);
    #: null once the job is terminal.
    pollAfterMs: int | None = None
    metrics: JobMetrics = Field(default_factory=JobMetrics)
