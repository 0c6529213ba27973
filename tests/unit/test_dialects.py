"""Each model is sent what it accepts and read however it answers (``chuixiang.upstream.dialects``).

The fake model refuses ``response_format`` for ``gpt-image-*`` with the 400 OpenAI sends, and answers
``dall-e-*`` with a URL unless asked for ``b64_json``, as OpenAI does.
"""

from __future__ import annotations

import json

import pytest

from chuixiang.generation.image import image_payload
from chuixiang.generation.recipe import whole_messages
from chuixiang.generation.recipe_call import chat_payload
from chuixiang.upstream.dialects import DialectError, dialect_for, parse_dialects
from chuixiang.upstream.failures import refused_param
from chuixiang.upstream.images import may_fetch

# --- what each model is sent (no sockets) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ("gpt-4.1-mini", "max_tokens"),
        ("deepseek-chat", "max_tokens"),
        ("qwen3-max", "max_tokens"),
        ("o3-mini", "max_completion_tokens"),
        ("o4-mini", "max_completion_tokens"),
        ("gpt-5-nano", "max_completion_tokens"),
    ],
)
def test_the_token_limit_field_per_family(model: str, field: str) -> None:
    payload = chat_payload(model, whole_messages("番茄炒蛋"), 3000)
    assert payload[field] == 3000 and ({"max_tokens", "max_completion_tokens"} - {field}).isdisjoint(payload)
    assert payload["stream"] is True and payload["stream_options"] == {"include_usage": True}


def test_the_configured_map_lays_over_the_built_in_family() -> None:
    configured = json.dumps(
        {
            "gpt-5": {"streamUsage": False},
            "my-gw/": {"stream": False, "jsonMode": True, "extra": {"enable_thinking": False}},
        }
    )
    gpt5 = chat_payload("gpt-5-mini", whole_messages("x"), 100, dialect_for("gpt-5-mini", configured))
    assert gpt5["max_completion_tokens"] == 100 and "stream_options" not in gpt5  # built-in field kept
    mine = chat_payload("my-gw/qwen3", whole_messages("x"), 100, dialect_for("my-gw/qwen3", configured))
    assert mine["stream"] is False and "stream_options" not in mine
    assert mine["response_format"] == {"type": "json_object"} and mine["enable_thinking"] is False
    exact = json.dumps({"o3": {"maxTokensField": "max_tokens"}, "o3-pro-gateway": {"streamUsage": False}})
    # The longest configured key wins alone, over the built-in family (o3: max_completion_tokens).
    assert dialect_for("o3-pro-gateway", exact).max_tokens_field == "max_completion_tokens"
    assert dialect_for("o3-pro-gateway", exact).stream_usage is False
    assert dialect_for("o3-mini", exact).max_tokens_field == "max_tokens"


@pytest.mark.parametrize(
    ("model", "response_format"),
    [("gpt-image-1", None), ("gpt-image-1.5", None), ("dall-e-3", "b64_json"), ("flux-dev", "b64_json")],
)
def test_the_image_request_per_family(model: str, response_format: str | None) -> None:
    assert image_payload(model, "a dish").get("response_format") == response_format


@pytest.mark.parametrize(
    "raw", ['{"x": {"maxTokensField": "tokens"}}', '{"x": {"unknownField": 1}}', "[1]", "{oops", '{"x": 3}']
)
def test_a_broken_map_is_refused(raw: str) -> None:
    with pytest.raises(DialectError):
        parse_dialects(raw)


def test_which_parameter_a_4xx_refused() -> None:
    openai = (
        '{"error": {"message": "Unknown parameter: \'response_format\'.", "type": "invalid_request_error", '
        '"param": "response_format", "code": "unknown_parameter"}}'
    )
    assert refused_param(openai) == "response_format"
    assert (
        refused_param(
            '{"error": {"message": "Unsupported parameter: \'max_tokens\' is not supported with this '
            'model. Use \'max_completion_tokens\' instead.", "param": "max_tokens", '
            '"code": "unsupported_parameter"}}'
        )
        == "max_tokens"
    )
    assert refused_param("Unrecognized request argument supplied: stream_options") == "stream_options"
    assert refused_param('{"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}') is None


def test_an_image_url_is_fetched_only_over_https_or_from_the_endpoint() -> None:
    api = "http://127.0.0.1:8765/v1/images/generations"
    assert may_fetch("https://oaidalleapiprodscus.blob.core.windows.net/private/img.png?sig=x", api)
    assert may_fetch("http://127.0.0.1:8765/v1/files/image-0.png", api)
    for url in (
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",
        "file:///etc/passwd",
        "ftp://example.com/x.png",
        "https:///nohost",
    ):
        assert not may_fetch(url, api), url


# --- on a real socket: the fake answers as OpenAI does -------------------------------------------


# --- a provider that does not stream ---------------------------------------------------------------
