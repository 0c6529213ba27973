"""Each model's dialect of "OpenAI-compatible": which request fields it takes, and what its image answer is.

Every gateway and model family differs a little, and a wrong field is a 400 on every call:

* OpenAI's reasoning models (``o1``, ``o3``, ``o4-mini``, ``gpt-5`` …) refuse ``max_tokens`` and take
  ``max_completion_tokens``;
* many providers report token usage in a stream only when asked (``stream_options.include_usage``), and
  a few refuse the field;
* ``gpt-image-*`` takes no ``response_format`` and always answers ``b64_json``; ``dall-e-*`` answers
  ``url`` unless asked otherwise; other gateways answer either;
* some models are better held to JSON with ``response_format: {"type": "json_object"}``; a gateway may
  need extra fields (``enable_thinking: false``, a ``user`` tag).

A dialect is data: built-in defaults for the well-known families (:data:`BUILT_IN`), overridden per
model name or name prefix by the ``ModelDialects`` template parameter, a JSON object such as
``{"o4-": {"maxTokensField": "max_completion_tokens"}, "my-gateway/qwen3": {"extra": {"enable_thinking": false}}}``.
The longest matching key wins (an exact name is the longest of all); its fields are laid over the
built-in dialect of the same model. ``chuixiang ladder`` refuses a map that does not parse, so a typo
cannot reach production.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..observability import logger
from .failures import StatusError, UpstreamError


class Dialect(BaseModel):
    """What one model accepts. Field names are the JSON keys of ``ModelDialects``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field("max_tokens", alias="maxTokensField")
    #: ``False``: ask for one JSON answer (a model or gateway that cannot stream); only the total limit bounds it.
    stream: bool = True
    #: Send ``stream_options: {"include_usage": true}`` (usage while streaming; a few servers refuse the field).
    stream_usage: bool = Field(True, alias="streamUsage")
    #: Send ``response_format: {"type": "json_object"}`` with the recipe request.
    json_mode: bool = Field(False, alias="jsonMode")
    #: The image request's ``response_format``: ``b64_json``, ``url``, or ``none`` to send no such field.
    image_response_format: Literal["b64_json", "url", "none"] = Field("b64_json", alias="imageResponseFormat")
    #: Extra top-level fields for this model's requests (chat and image), e.g. ``{"enable_thinking": false}``.
    extra: dict[str, Any] = Field(default_factory=dict)


class DialectError(ValueError):
    """``ModelDialects`` is not a JSON object of dialects."""


#: Built-in dialects by model-name prefix (longest match wins).
BUILT_IN: dict[str, dict[str, Any]] = {
    "o1": {"maxTokensField": "max_completion_tokens"},
    "o3": {"maxTokensField": "max_completion_tokens"},
    "o4-": {"maxTokensField": "max_completion_tokens"},
    "gpt-5": {"maxTokensField": "max_completion_tokens"},
    "gpt-6": {"maxTokensField": "max_completion_tokens"},
    "gpt-image-": {"imageResponseFormat": "none"},
    "dall-e-": {"imageResponseFormat": "b64_json"},
}


def parse_dialects(raw: str) -> dict[str, dict[str, Any]]:
    """The ``ModelDialects`` parameter, checked: every value must be a valid :class:`Dialect`."""
    if not raw.strip():
        return {}
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise DialectError(f"ModelDialects is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise DialectError("ModelDialects must be a JSON object keyed by model name or prefix")
    for key, value in doc.items():
        if not isinstance(value, dict):
            raise DialectError(f"ModelDialects[{key!r}] must be an object")
        try:
            Dialect.model_validate(value)
        except ValidationError as exc:
            raise DialectError(
                f"ModelDialects[{key!r}]: {exc.errors()[0]['msg']} ({'.'.join(map(str, exc.errors()[0]['loc']))})"
            ) from exc
    return doc


def _longest_match(model: str, table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in table if model.startswith(k)]
    return table[max(keys, key=len)] if keys else {}


@lru_cache(maxsize=64)
def dialect_for(model: str, configured: str = "") -> Dialect:
    """The dialect of ``model``: the built-in family's, with the configured entry laid over it."""
    fields = {**_longest_match(model, BUILT_IN), **_longest_match(model, parse_dialects(configured))}
    return Dialect.model_validate(fields)


def report_refused_param(failure: UpstreamError, model: str) -> None:
    """A 4xx that names a request field as unknown: every call to this model will fail the same way until
    its dialect stops sending the field, so say which field, loudly, once per failure."""
    param = failure.param if isinstance(failure, StatusError) else None
    if param:
        logger.warning(
            "upstream refused a request parameter",
            extra={
                "model": model,
                "param": param,
                "status": failure.status,
                "fix": f"set {model!r} in the ModelDialects parameter so it is not sent",
            },
        )
