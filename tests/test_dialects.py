"""Each model is sent what it accepts and read however it answers (``chuixiang.upstream.dialects``).

The fake model refuses ``response_format`` for ``gpt-image-*`` with the 400 OpenAI sends, and answers
``dall-e-*`` with a URL unless asked for ``b64_json``, as OpenAI does.
"""

from __future__ import annotations

import json

import pytest

from chuixiang.generation.image import image_payload
from chuixiang.generation.recipe import chat_payload
from chuixiang.settings import Settings
from chuixiang.upstream.dialects import DialectError, dialect_for, parse_dialects
from chuixiang.upstream.failures import refused_param
from chuixiang.upstream.images import may_fetch
from chuixiang_local.fake_model import ChatBehaviour, FakeModel, ImageBehaviour
from chuixiang_local.template import Template

from .conftest import LATE_S
from .stage_helpers import function_settings, run_image, run_recipe

# --- what each model is sent (no sockets) ----------------------------------------------------------


@pytest.mark.parametrize(("model", "field"), [
    ("gpt-4.1-mini", "max_tokens"), ("deepseek-chat", "max_tokens"), ("qwen3-max", "max_tokens"),
    ("o3-mini", "max_completion_tokens"), ("o4-mini", "max_completion_tokens"), ("gpt-5-nano", "max_completion_tokens"),
])
def test_the_token_limit_field_per_family(model: str, field: str) -> None:
    payload = chat_payload(model, "番茄炒蛋", 3000)
    assert payload[field] == 3000 and ({"max_tokens", "max_completion_tokens"} - {field}).isdisjoint(payload)
    assert payload["stream"] is True and payload["stream_options"] == {"include_usage": True}


def test_the_configured_map_lays_over_the_built_in_family() -> None:
    configured = json.dumps({"gpt-5": {"streamUsage": False}, "my-gw/": {"stream": False, "jsonMode": True,
                                                                         "extra": {"enable_thinking": False}}})
    gpt5 = chat_payload("gpt-5-mini", "x", 100, dialect_for("gpt-5-mini", configured))
    assert gpt5["max_completion_tokens"] == 100 and "stream_options" not in gpt5  # built-in field kept
    mine = chat_payload("my-gw/qwen3", "x", 100, dialect_for("my-gw/qwen3", configured))
    assert mine["stream"] is False and "stream_options" not in mine
    assert mine["response_format"] == {"type": "json_object"} and mine["enable_thinking"] is False
    exact = json.dumps({"o3": {"maxTokensField": "max_tokens"}, "o3-pro-gateway": {"streamUsage": False}})
    # The longest configured key wins alone, over the built-in family (o3: max_completion_tokens).
    assert dialect_for("o3-pro-gateway", exact).max_tokens_field == "max_completion_tokens"
    assert dialect_for("o3-pro-gateway", exact).stream_usage is False
    assert dialect_for("o3-mini", exact).max_tokens_field == "max_tokens"


@pytest.mark.parametrize(("model", "response_format"), [
    ("gpt-image-1", None), ("gpt-image-1.5", None), ("dall-e-3", "b64_json"), ("flux-dev", "b64_json")])
def test_the_image_request_per_family(model: str, response_format: str | None) -> None:
    assert image_payload(model, "a dish").get("response_format") == response_format


@pytest.mark.parametrize("raw", ['{"x": {"maxTokensField": "tokens"}}', '{"x": {"unknownField": 1}}', "[1]", "{oops",
                                 '{"x": 3}'])
def test_a_broken_map_is_refused(raw: str) -> None:
    with pytest.raises(DialectError):
        parse_dialects(raw)


def test_the_ladder_refuses_a_broken_map() -> None:
    from chuixiang_local.ladder import build_ladder

    bad = build_ladder(Template({"ModelDialects": '{"o3": {"maxTokensField": "nope"}}'}))
    assert not bad.ok and any("ModelDialects['o3']" in f for f in bad.failures())
    assert build_ladder(Template({"ModelDialects": '{"o3": {"streamUsage": false}}'})).ok


def test_which_parameter_a_4xx_refused() -> None:
    openai = ('{"error": {"message": "Unknown parameter: \'response_format\'.", "type": "invalid_request_error", '
              '"param": "response_format", "code": "unknown_parameter"}}')
    assert refused_param(openai) == "response_format"
    assert refused_param('{"error": {"message": "Unsupported parameter: \'max_tokens\' is not supported with this '
                         'model. Use \'max_completion_tokens\' instead.", "param": "max_tokens", '
                         '"code": "unsupported_parameter"}}') == "max_tokens"
    assert refused_param("Unrecognized request argument supplied: stream_options") == "stream_options"
    assert refused_param('{"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}') is None


def test_an_image_url_is_fetched_only_over_https_or_from_the_endpoint() -> None:
    api = "http://127.0.0.1:8765/v1/images/generations"
    assert may_fetch("https://oaidalleapiprodscus.blob.core.windows.net/private/img.png?sig=x", api)
    assert may_fetch("http://127.0.0.1:8765/v1/files/image-0.png", api)
    for url in ("http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",
                "file:///etc/passwd", "ftp://example.com/x.png", "https:///nohost"):
        assert not may_fetch(url, api), url


# --- on a real socket: the fake answers as OpenAI does -------------------------------------------


def _image_settings(template: Template, base_url: str, model: str, dialects: str = "") -> Settings:
    settings = function_settings(template, "image", base_url)
    return settings.model_copy(update={"image_model": model, "model_dialects": dialects})


@pytest.mark.sockets
def test_gpt_image_gets_no_response_format_and_answers_b64(fake: FakeModel, scaled_template: Template) -> None:
    outcome, _ = run_image(scaled_template, fake.base_url, 3000,
                           settings=_image_settings(scaled_template, fake.base_url, "gpt-image-1"))
    assert outcome.error is None and outcome.image is not None and outcome.image.data.startswith(b"\x89PNG")
    assert "response_format" not in fake.bodies[-1]


@pytest.mark.sockets
def test_a_refused_parameter_is_logged_with_its_name(fake: FakeModel, scaled_template: Template,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    wrong = json.dumps({"gpt-image-": {"imageResponseFormat": "b64_json"}})  # what every call sent before
    outcome, _ = run_image(scaled_template, fake.base_url, 3000,
                           settings=_image_settings(scaled_template, fake.base_url, "gpt-image-1", wrong))
    assert outcome.error is not None and outcome.error.code == "IMAGE_UPSTREAM_ERROR"
    assert fake.count("/images/generations") == 1  # a 400 is not retried
    line = next(r for r in caplog.records if r.getMessage() == "upstream refused a request parameter")
    assert (line.param, line.model, line.status) == ("response_format", "gpt-image-1", 400)  # type: ignore[attr-defined]


@pytest.mark.sockets
@pytest.mark.parametrize(("model", "dialects", "behaviour"), [
    ("dall-e-3", json.dumps({"dall-e-": {"imageResponseFormat": "url"}}), ImageBehaviour()),
    ("flux-schnell", "", ImageBehaviour(kind="url")),  # a gateway that answers url whatever it was asked
])
def test_a_url_answer_is_downloaded(model: str, dialects: str, behaviour: ImageBehaviour, fake: FakeModel,
                                     scaled_template: Template) -> None:
    fake.image_script.append(behaviour)
    outcome, _ = run_image(scaled_template, fake.base_url, 3000,
                           settings=_image_settings(scaled_template, fake.base_url, model, dialects))
    assert outcome.error is None and outcome.image is not None and outcome.image.data.startswith(b"\x89PNG")
    assert len(fake.files) == 1


@pytest.mark.sockets
def test_a_url_answer_over_the_size_cap_is_invalid(fake: FakeModel, scaled_template: Template) -> None:
    fake.image_script.append(ImageBehaviour(kind="url", size_bytes=300_000))
    settings = _image_settings(scaled_template, fake.base_url, "flux-schnell").model_copy(
        update={"image_max_bytes": 200_000})
    outcome, _ = run_image(scaled_template, fake.base_url, 3000, settings=settings)
    assert outcome.error is not None and outcome.error.code == "IMAGE_INVALID"


# --- a provider that does not stream ---------------------------------------------------------------


def _recipe_settings(template: Template, base_url: str, dialects: str = "") -> Settings:
    return function_settings(template, "recipe", base_url).model_copy(update={"model_dialects": dialects})


@pytest.mark.sockets
def test_one_late_json_answer_is_bounded_by_the_total_limit_not_first_content(
        fake: FakeModel, scaled_template: Template) -> None:
    """Headers at once, the document after longer than the first-content limit: the Content-Type says it is
    no stream, so only the total limit bounds it (it cannot send content earlier), and it succeeds."""
    first_content_s = scaled_template.number("RecipeFirstContentTimeoutMs") / 1000
    total_s = scaled_template.number("RecipeTotalTimeoutMs") / 1000
    late = (first_content_s + total_s) / 2
    fake.chat_script.append(ChatBehaviour(kind="json", body_delay_s=late))
    outcome, elapsed = run_recipe(scaled_template, fake.base_url, 5000)
    assert outcome.error is None and outcome.recipe is not None, outcome.error
    assert late <= elapsed < total_s and outcome.metrics.chunks == 1


@pytest.mark.sockets
def test_a_json_answer_later_than_the_total_limit_is_cut_there(fake: FakeModel, scaled_template: Template) -> None:
    total_s = scaled_template.number("RecipeTotalTimeoutMs") / 1000
    fake.chat_script.append(ChatBehaviour(kind="json", body_delay_s=total_s + 5))
    outcome, elapsed = run_recipe(scaled_template, fake.base_url, 5000)
    assert outcome.error is not None and outcome.error.code == "RECIPE_TIMEOUT"
    assert total_s <= elapsed <= total_s + LATE_S


@pytest.mark.sockets
@pytest.mark.parametrize("streamed", [True, False])
def test_a_model_declared_not_streaming_waits_for_its_headers_up_to_the_total(
        streamed: bool, fake: FakeModel, scaled_template: Template) -> None:
    """Headers and document together, after the first-content limit: a streaming request cannot tell this
    from a queued stream and gives up at first content; a model whose dialect says ``stream: false`` is
    asked for one document and waits up to the total limit."""
    first_content_s = scaled_template.number("RecipeFirstContentTimeoutMs") / 1000
    total_s = scaled_template.number("RecipeTotalTimeoutMs") / 1000
    fake.chat_script.append(ChatBehaviour(kind="json", headers_delay_s=(first_content_s + total_s) / 2))
    model = function_settings(scaled_template, "recipe", fake.base_url).recipe_model
    dialects = "" if streamed else json.dumps({model: {"stream": False}})
    outcome, elapsed = run_recipe(scaled_template, fake.base_url, 5000,
                                  settings=_recipe_settings(scaled_template, fake.base_url, dialects))
    assert fake.bodies[-1]["stream"] is streamed
    if streamed:
        assert outcome.error is not None and outcome.error.code == "RECIPE_TIMEOUT"
        assert first_content_s <= elapsed <= first_content_s + LATE_S
    else:
        assert outcome.error is None and outcome.recipe is not None, outcome.error

