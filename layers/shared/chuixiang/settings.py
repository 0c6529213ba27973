"""Function configuration, read once from the environment the template sets.

Names follow the seed's server variables (``RECIPE_TEXT_TIMEOUT_MS`` is the
*total* generation limit, ``RECIPE_TEXT_IDLE_TIMEOUT_MS`` the longest silence),
so the meaning of a setting cannot drift from what operators know.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    jobs_table: str = Field("chuixiang-jobs", validation_alias="JOBS_TABLE")
    images_bucket: str = Field("chuixiang-images", validation_alias="IMAGES_BUCKET")
    state_machine_arn: str = Field("", validation_alias="STATE_MACHINE_ARN")

    model_base_url: str = Field("http://127.0.0.1:8765/v1", validation_alias="MODEL_BASE_URL")
    recipe_model: str = Field("gpt-6-luna", validation_alias="RECIPE_MODEL")
    image_model: str = Field("gpt-image-1", validation_alias="IMAGE_MODEL")
    model_api_key_secret_arn: str = Field("", validation_alias="MODEL_API_KEY_SECRET_ARN")

    recipe_total_timeout_ms: int = Field(140_000, gt=0, validation_alias="RECIPE_TEXT_TIMEOUT_MS")
    recipe_idle_timeout_ms: int = Field(30_000, gt=0, validation_alias="RECIPE_TEXT_IDLE_TIMEOUT_MS")
    recipe_retry_window_ms: int = Field(20_000, ge=0, validation_alias="RECIPE_RETRY_WINDOW_MS")
    recipe_max_tokens: int = Field(3000, gt=0, validation_alias="RECIPE_MAX_TOKENS")
    image_retry_window_ms: int = Field(15_000, ge=0, validation_alias="IMAGE_RETRY_WINDOW_MS")
    image_max_bytes: int = Field(8 * 1024 * 1024, gt=0, validation_alias="IMAGE_MAX_BYTES")

    recipe_function_timeout_s: int = Field(150, gt=0, validation_alias="RECIPE_FUNCTION_TIMEOUT")
    image_function_timeout_s: int = Field(100, gt=0, validation_alias="IMAGE_FUNCTION_TIMEOUT")
    job_timeout_s: int = Field(300, gt=0, validation_alias="JOB_TIMEOUT_SECONDS")
    job_ttl_days: int = Field(30, gt=0, validation_alias="JOB_TTL_DAYS")
    image_url_ttl_s: int = Field(3600, gt=0, validation_alias="IMAGE_URL_TTL_SECONDS")
    #: Local runs only: export images here and use the file path as ``image.url``.
    local_image_dir: str = Field("", validation_alias="LOCAL_IMAGE_DIR")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
