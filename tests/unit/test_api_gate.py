"""The gate before the resolver (``chuixiang.api_gate.gate``): what a hostile client sends is refused in the API's
error shape before any work proportional to its size is done."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from chuixiang import api_gate

from ..support.lambda_doubles import api_event

_LOADS = json.loads  # kept: a test below makes the module's json.loads fail


def _refusal(event: dict[str, Any]) -> tuple[int, str] | None:
    answer = api_gate.gate(event)
    if answer is None:
        return None
    return answer["statusCode"], _LOADS(answer["body"])["error"]["code"]


def test_a_method_is_case_sensitive() -> None:
    """RFC 9110 9.1: ``post`` is not ``POST`` (it was accepted as one)."""
    event = api_event("POST", "/recipes", json.dumps({"dish": "番茄炒蛋"}))
    event["requestContext"]["http"]["method"] = "post"
    assert _refusal(event) == (405, "METHOD_NOT_ALLOWED")


def test_a_key_named_twice_is_refused() -> None:
    """RFC 8259 4: an object whose names repeat means different things to different parsers."""
    assert _refusal(api_event("POST", "/recipes", '{"dish": "番茄炒蛋", "dish": "宫保鸡丁"}')) == (400, "INVALID_DISH")
    assert _refusal(api_event("POST", "/recipes", '{"dish": "番茄炒蛋"}')) is None


@pytest.mark.parametrize("encoded", [False, True], ids=["text", "base64"])
def test_a_wide_body_is_refused_before_it_is_decoded_or_parsed(encoded: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5.9 MB body of 350k keys (the function can receive up to 6 MB): 413 without parsing a byte of it
    (before: one validation error per extra key, ~8 s of CPU, and three at once a 503 from the front door)."""
    keys = 260_000 if encoded else 350_000  # the event's body (base64: 4/3 larger) just under 6 MB either way
    wide = "{" + ",".join(f'"key{n:09d}":0' for n in range(keys)) + "}"
    body = base64.b64encode(wide.encode()).decode() if encoded else wide
    assert 5_500_000 < len(body) < 6_291_456
    event = api_event("POST", "/recipes", body)
    event["isBase64Encoded"] = encoded

    def parsed(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("the body was parsed")

    monkeypatch.setattr("chuixiang.api_gate.json.loads", parsed)
    monkeypatch.setattr("chuixiang.api_gate.base64.b64decode", parsed)
    assert _refusal(event) == (413, "PAYLOAD_TOO_LARGE")


def test_the_body_bound_is_far_above_any_dish_request() -> None:
    longest = json.dumps({"dish": "\U0001f35c" * 400})  # 400 characters of 4 UTF-8 bytes, escaped
    assert len(longest) < api_gate.MAX_POST_BODY_BYTES
    assert _refusal(api_event("POST", "/recipes", longest)) is None
    assert _refusal(api_event("POST", "/recipes", json.dumps({"dish": "x" * api_gate.MAX_POST_BODY_BYTES}))) == (
        413,
        "PAYLOAD_TOO_LARGE",
    )


def test_the_published_schema_states_the_dish_rule() -> None:
    """The OpenAPI document says 1-40 characters (it said 400, the raw bound before normalisation)."""
    from chuixiang.dish import MAX_DISH_CHARS
    from chuixiang.schemas import CreateRecipeRequest

    schema = CreateRecipeRequest.model_json_schema()["properties"]["dish"]
    assert (schema["minLength"], schema["maxLength"]) == (1, MAX_DISH_CHARS) == (1, 40)
    from stack_template import REPO_ROOT

    published = _LOADS((REPO_ROOT / "docs" / "openapi.json").read_text())
    assert published["components"]["schemas"]["CreateRecipeRequest"]["properties"]["dish"]["maxLength"] == 40


@pytest.mark.parametrize(
    "body", ['[{"dish": "番茄炒蛋"}]', '"番茄炒蛋"', "42", "true"], ids=["array", "string", "number", "bool"]
)
def test_a_body_that_is_not_a_json_object_is_refused(body: str) -> None:
    """The schema says object: an array of dishes was accepted and its first cooked."""
    answer = api_gate.gate(api_event("POST", "/recipes", body))
    assert answer is not None and answer["statusCode"] == 400
    error = _LOADS(answer["body"])["error"]
    assert error["code"] == "INVALID_DISH" and "must be a JSON object" in error["reason"]


@pytest.mark.parametrize(
    ("content_type", "refused"),
    [
        ("application/json; charset=utf-16", True),
        ("application/json; charset=ISO-8859-1", True),
        ('application/json; charset="UTF-8"', False),
        ("application/json;charset=utf8", False),
        ("application/json", False),
    ],
)
def test_a_charset_other_than_utf8_is_refused(content_type: str, refused: bool) -> None:
    """RFC 8259 8.1: JSON between systems is UTF-8; a UTF-8 body declared UTF-16 was accepted as UTF-8."""
    event = api_event("POST", "/recipes", json.dumps({"dish": "番茄炒蛋"}), headers={"Content-Type": content_type})
    assert _refusal(event) == ((415, "UNSUPPORTED_MEDIA_TYPE") if refused else None)
