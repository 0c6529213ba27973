"""Each model is sent what it accepts and read however it answers (``chuixiang.upstream.dialects``).

The fake model refuses ``response_format`` for ``gpt-image-*`` with the 400 OpenAI sends, and answers
``dall-e-*`` with a URL unless asked for ``b64_json``, as OpenAI does.
"""

from __future__ import annotations

import json

import pytest
from stack_template import Template

from chuixiang.settings import Settings
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, ImageBehaviour

from ..support.scaled import LATE_S
from ..support.stages import function_settings, run_image, run_recipe

# --- what each model is sent (no sockets) ----------------------------------------------------------


# --- on a real socket: the fake answers as OpenAI does -------------------------------------------


def _image_settings(template: Template, base_url: str, model: str, dialects: str = "") -> Settings:
    settings = function_settings(template, "image", base_url)
    return settings.model_copy(update={"image_model": model, "model_dialects": dialects})


def test_gpt_image_gets_no_response_format_and_answers_b64(fake: FakeModel, scaled_template: Template) -> None:
    outcome, _ = run_image(
        scaled_template, fake.base_url, 3000, settings=_image_settings(scaled_template, fake.base_url, "gpt-image-1")
    )
    assert outcome.error is None and outcome.result is not None and outcome.result.data.startswith(b"\x89PNG")
    assert "response_format" not in fake.bodies[-1]


def test_a_refused_parameter_is_logged_with_its_name(
    fake: FakeModel, scaled_template: Template, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = json.dumps({"gpt-image-": {"imageResponseFormat": "b64_json"}})  # what every call sent before
    outcome, _ = run_image(
        scaled_template,
        fake.base_url,
        3000,
        settings=_image_settings(scaled_template, fake.base_url, "gpt-image-1", wrong),
    )
    assert outcome.error is not None and outcome.error.code == "IMAGE_UPSTREAM_ERROR"
    assert fake.count("/images/generations") == 1  # a 400 is not retried
    line = next(r for r in caplog.records if r.getMessage() == "upstream refused a request parameter")
    assert (line.param, line.model, line.status) == ("response_format", "gpt-image-1", 400)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("model", "dialects", "behaviour"),
    [
        ("dall-e-3", json.dumps({"dall-e-": {"imageResponseFormat": "url"}}), ImageBehaviour()),
        ("flux-schnell", "", ImageBehaviour(kind="url")),  # a gateway that answers url whatever it was asked
    ],
)
def test_a_url_answer_is_downloaded(
    model: str, dialects: str, behaviour: ImageBehaviour, fake: FakeModel, scaled_template: Template
) -> None:
    fake.image_script.append(behaviour)
    outcome, _ = run_image(
        scaled_template, fake.base_url, 3000, settings=_image_settings(scaled_template, fake.base_url, model, dialects)
    )
    assert outcome.error is None and outcome.result is not None and outcome.result.data.startswith(b"\x89PNG")
    assert len(fake.files) == 1


def test_a_url_answer_over_the_size_cap_is_invalid(fake: FakeModel, scaled_template: Template) -> None:
    fake.image_script.append(ImageBehaviour(kind="url", size_bytes=300_000))
    settings = _image_settings(scaled_template, fake.base_url, "flux-schnell").model_copy(
        update={"image_max_bytes": 200_000}
    )
    outcome, _ = run_image(scaled_template, fake.base_url, 3000, settings=settings)
    assert outcome.error is not None and outcome.error.code == "IMAGE_INVALID"


# --- a provider that does not stream ---------------------------------------------------------------


def _recipe_settings(template: Template, base_url: str, dialects: str = "") -> Settings:
    return function_settings(template, "recipe", base_url).model_copy(update={"model_dialects": dialects})


def test_one_late_json_answer_is_bounded_by_the_total_limit_not_first_content(
    fake: FakeModel, scaled_template: Template
) -> None:
    """Headers at once, the document after longer than the first-content limit: the Content-Type says it is
    no stream, so only the total limit bounds it (it cannot send content earlier), and it succeeds."""
    first_content_s = scaled_template.number("RecipeFirstContentTimeoutMs") / 1000
    total_s = scaled_template.number("RecipeTotalTimeoutMs") / 1000
    late = (first_content_s + total_s) / 2
    fake.chat_script.append(ChatBehaviour(kind="json", body_delay_s=late))
    outcome, elapsed = run_recipe(scaled_template, fake.base_url, 5000)
    assert outcome.error is None and outcome.result is not None, outcome.error
    assert late <= elapsed < total_s and outcome.metrics.chunks == 1


def test_a_json_answer_later_than_the_total_limit_is_cut_there(fake: FakeModel, scaled_template: Template) -> None:
    total_s = scaled_template.number("RecipeTotalTimeoutMs") / 1000
    fake.chat_script.append(ChatBehaviour(kind="json", body_delay_s=total_s + 5))
    outcome, elapsed = run_recipe(scaled_template, fake.base_url, 5000)
    assert outcome.error is not None and outcome.error.code == "RECIPE_TIMEOUT"
    assert total_s <= elapsed <= total_s + LATE_S


@pytest.mark.parametrize("streamed", [True, False])
def test_a_model_declared_not_streaming_waits_for_its_headers_up_to_the_total(
    streamed: bool, fake: FakeModel, scaled_template: Template
) -> None:
    """Headers and document together, after the first-content limit: a streaming request cannot tell this
    from a queued stream and gives up at first content; a model whose dialect says ``stream: false`` is
    asked for one document and waits up to the total limit."""
    first_content_s = scaled_template.number("RecipeFirstContentTimeoutMs") / 1000
    total_s = scaled_template.number("RecipeTotalTimeoutMs") / 1000
    fake.chat_script.append(ChatBehaviour(kind="json", headers_delay_s=(first_content_s + total_s) / 2))
    model = function_settings(scaled_template, "recipe", fake.base_url).recipe_model
    dialects = "" if streamed else json.dumps({model: {"stream": False}})
    outcome, elapsed = run_recipe(
        scaled_template, fake.base_url, 5000, settings=_recipe_settings(scaled_template, fake.base_url, dialects)
    )
    assert fake.bodies[-1]["stream"] is streamed
    if streamed:
        assert outcome.error is not None and outcome.error.code == "RECIPE_TIMEOUT"
        assert first_content_s <= elapsed <= first_content_s + LATE_S
    else:
        assert outcome.error is None and outcome.result is not None, outcome.error
