"""Function configuration, read once from the environment the template sets.

Plain settings are fields here; every limit of the timeout ladder is a field
built from its declaration in :mod:`chuixiang.timeouts` (same environment
variable, default and bounds), so a default cannot drift from the template's.
Environment names follow the ones operators already know: ``RECIPE_TEXT_TIMEOUT_MS``
is the *total* generation limit, ``RECIPE_TEXT_IDLE_TIMEOUT_MS`` the longest silence.
Read a limit with ``LIMIT.of(settings)``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, create_model
from pydantic_settings import BaseSettings, SettingsConfigDict

from .timeouts import LIMITS


class _Config(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    jobs_table: str = Field("chuixiang-jobs", validation_alias="JOBS_TABLE")
    images_bucket: str = Field("chuixiang-images", validation_alias="IMAGES_BUCKET")
    state_machine_arn: str = Field("", validation_alias="STATE_MACHINE_ARN")

    model_base_url: str = Field("http://127.0.0.1:8765/v1", validation_alias="MODEL_BASE_URL")
    recipe_model: str = Field("gpt-6-luna", validation_alias="RECIPE_MODEL")
    image_model: str = Field("gpt-image-1", validation_alias="IMAGE_MODEL")
    #: Comma-separated models on the same base URL, tried in order when a model cannot serve now.
    recipe_fallback_models: str = Field("", validation_alias="RECIPE_FALLBACK_MODELS")
    image_fallback_models: str = Field("", validation_alias="IMAGE_FALLBACK_MODELS")
    #: Comma-separated models the canary probes (the function only exists when this is set).
    canary_models: str = Field("", validation_alias="CANARY_MODELS")
    model_api_key_secret_arn: str = Field("", validation_alias="MODEL_API_KEY_SECRET_ARN")
    #: The public API's base URL (the synthetic job calls it as a client does).
    api_url: str = Field("", validation_alias="API_URL")
    #: With ``JwtIssuer`` set: the secret holding the bearer token the synthetic job sends.
    synthetic_token_secret_arn: str = Field("", validation_alias="SYNTHETIC_TOKEN_SECRET_ARN")
    #: ``ordered`` (the configured order) or ``fastest`` (by measured speed, skipping who cannot finish in time).
    recipe_routing: Literal["ordered", "fastest"] = Field("fastest", validation_alias="RECIPE_ROUTING")
    #: ``auto`` (per job, whichever is predicted faster), ``whole`` (one streamed answer) or ``parallel`` (an
    #: outline, then the sections side by side).
    recipe_sections: Literal["auto", "whole", "parallel"] = Field("auto", validation_alias="RECIPE_SECTIONS")
    #: The most streams one job in sections holds at once (``RecipeMaxStreams``).
    recipe_max_streams: int = Field(11, ge=4, le=15, validation_alias="RECIPE_MAX_STREAMS")
    #: A model's measured health older than this says nothing.
    model_health_max_age_s: int = Field(3600, ge=60, validation_alias="MODEL_HEALTH_MAX_AGE_SECONDS")
    #: Per model name or prefix, the request fields it takes (``chuixiang.upstream.dialects``); JSON.
    model_dialects: str = Field("", validation_alias="MODEL_DIALECTS")

    #: Jobs the API lets run at once (``RecipeConcurrency``), each holding one model stream; beyond them a POST
    #: gets 429.
    admission_slots: int = Field(100, gt=0, validation_alias="ADMISSION_SLOTS")
    #: The provider key's concurrent-request quota (``RecipeKeyStreams``; 0: not stated, learned from its 429s).
    recipe_key_streams: int = Field(0, ge=0, validation_alias="RECIPE_KEY_STREAMS")
    #: The key's tokens per minute as the provider counts them at admission, prompt + ``max_tokens``
    #: (``RecipeKeyTokensPerMinute``; 0: not stated).
    recipe_key_tokens_per_minute: int = Field(0, ge=0, validation_alias="RECIPE_KEY_TOKENS_PER_MINUTE")
    #: Of those, at most this many one caller's (0: no such cap); the caller as :func:`job_start.admitted_as` says.
    admission_per_caller: int = Field(2, ge=0, validation_alias="ADMISSION_PER_CALLER")
    recipe_max_tokens: int = Field(3000, gt=0, validation_alias="RECIPE_MAX_TOKENS")
    #: A typical recipe's length: what ``progress.percent`` and ``etaMs`` are measured against.
    recipe_expected_tokens: int = Field(1600, gt=0, validation_alias="RECIPE_EXPECTED_TOKENS")
    image_max_bytes: int = Field(8 * 1024 * 1024, gt=0, validation_alias="IMAGE_MAX_BYTES")
    job_ttl_days: int = Field(30, gt=0, validation_alias="JOB_TTL_DAYS")
    #: The bucket deletes images after this many days; the recipe cache forgets a dish one day earlier.
    image_retention_days: int = Field(90, ge=2, validation_alias="IMAGE_RETENTION_DAYS")
    image_url_ttl_s: int = Field(3600, gt=0, validation_alias="IMAGE_URL_TTL_SECONDS")
    #: Local runs only: export images here and use the file path as ``image.url``.
    local_image_dir: str = Field("", validation_alias="LOCAL_IMAGE_DIR")
    #: Local runs only: where ``chuixiang serve`` serves that folder over HTTP (``image.url`` is then a URL a
    #: page can load, standing in for the presigned one); empty: the file path.
    local_image_base_url: str = Field("", validation_alias="LOCAL_IMAGE_BASE_URL")

    @property
    def recipe_models(self) -> tuple[str, ...]:
        """The recipe model, then its fallbacks."""
        return _models(self.recipe_model, self.recipe_fallback_models)

    @property
    def admission_jobs(self) -> int:
        """Jobs admitted at once: ``RecipeConcurrency``, each holding one model stream for its life; no more than
        the key takes at once when its quota is stated (``RecipeKeyStreams``): a job beyond it would be refused by
        the provider, not by us with a ``Retry-After``."""
        if self.recipe_key_streams:
            return max(1, min(self.admission_slots, self.recipe_key_streams))
        return self.admission_slots

    @property
    def canary_model_list(self) -> tuple[str, ...]:
        return comma_list(self.canary_models)

    @property
    def image_models(self) -> tuple[str, ...]:
        return _models(self.image_model, self.image_fallback_models)


def comma_list(value: str) -> tuple[str, ...]:
    """``"a, b,,a"`` -> ``("a", "b")``: the parameters that name several models are comma-separated."""
    return tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))


def _models(primary: str, fallbacks: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for m in (primary, *comma_list(fallbacks)) if m))


def _limit_fields() -> dict[str, Any]:
    return {
        limit.attr: (int, Field(limit.default, ge=limit.minimum, validation_alias=limit.env))
        for limit in LIMITS
        if limit.attr and limit.env
    }


if TYPE_CHECKING:
    Settings = _Config
else:
    Settings = create_model("Settings", __base__=_Config, **_limit_fields())


def aws_endpoint() -> str | None:
    """``AWS_ENDPOINT_URL`` when it names an endpoint (the local cloud), else None. The template declares it
    empty so that ``sam local invoke --env-vars`` may set it; botocore ignores an empty variable, but an
    empty ``endpoint_url`` passed explicitly is an invalid endpoint, so every client is built through this."""
    return os.environ.get("AWS_ENDPOINT_URL") or None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
