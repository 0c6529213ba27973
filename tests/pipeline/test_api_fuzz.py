"""No input reaches a 500: thousands of generated requests against the api function's handler.

Hypothesis builds HTTP API events from hostile parts - any method on known and
unknown paths, any content type, bodies that are not UTF-8, not JSON, nested
thousands deep, the right shape with wrong values, headers with odd bytes and
oversized Idempotency-Keys - and every answer must be a 2xx or a 4xx in the one
error shape. The backend is moto in-process (executions are recorded, not run).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chuixiang import api_gate
from chuixiang_local.gateway.api_client import http_event

from ..support.api_on_moto import api_on_moto

EXAMPLES = 2000
KNOWN = {"/recipes": "POST", "/recipes/": "POST", "/openapi.json": "GET"}


@pytest.fixture(scope="module")
def app() -> Iterator[APIGatewayHttpResolver]:
    with api_on_moto(max_jobs=20, name="fuzz-jobs") as resolver:  # the default: 429s are answers too
        yield resolver


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=60),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
#: The widest generated body: keys of 14 bytes, ~700 KB (a body of any size the function can receive is refused
#: the same way, before it is parsed: tests/unit/test_api_gate.py sends 5.9 MB).
WIDEST_KEYS = 50_000


def wide_body(keys: int) -> bytes:
    return ("{" + ",".join(f'"key{n:07d}":0' for n in range(keys)) + "}").encode()


dishes = st.one_of(st.text(max_size=50), st.sampled_from(["番茄炒蛋", " 宫保鸡丁 ", "\x00", "a" * 41, "🍅炒蛋"]))
bodies = st.one_of(
    st.none(),
    st.binary(max_size=64),  # not UTF-8, not JSON
    st.builds(lambda d: json.dumps({"dish": d}, ensure_ascii=False).encode(), dishes),
    st.builds(lambda v: json.dumps(v).encode(), json_values),
    st.builds(
        lambda d, extra: json.dumps({"dish": d, **extra}).encode(),
        dishes,
        st.dictionaries(st.text(max_size=6), json_values, max_size=2),
    ),
    st.builds(lambda n: b"[" * n + b"]" * n, st.integers(900, 5000)),  # nested deeper than the parser
    st.builds(lambda n: b'{"dish": ' + b"[" * n, st.integers(1, 3000)),  # truncated
    st.builds(lambda n: b'{"dish": "x", "dish": "y"}' if n else b'{"dish": "x"}', st.integers(0, 1)),  # key twice
    st.builds(wide_body, st.integers(1_000, WIDEST_KEYS)),  # width, not depth: refused before it is parsed
)
content_types = st.one_of(
    st.none(),
    st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "text/plain",
            "multipart/form-data",
            "multipart/form-data; boundary=x",
            "application/x-www-form-urlencoded",
            "APPLICATION/JSON",
            "",
        ]
    ),
    st.text(max_size=30),
)
keys = st.one_of(st.none(), st.text(max_size=200), st.from_regex(r"[A-Za-z0-9-]{1,140}", fullmatch=True))
paths = st.one_of(
    st.sampled_from(["/recipes", "/recipes/", "/openapi.json", "/", "/swagger", "/recipes/x/y"]),
    st.builds(lambda s: "/recipes/" + s, st.text(min_size=1, max_size=80).filter(lambda s: "/" not in s)),
    st.builds(lambda s: "/" + s, st.text(max_size=30)),
)
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])


def event_for(
    method: str, path: str, body: bytes | None, content_type: str | None, key: str | None, odd_header: str
) -> dict[str, Any]:
    headers = {"x-odd": odd_header}
    if content_type is not None:
        headers["content-type"] = content_type
    if key is not None:
        headers["idempotency-key"] = key
    event = http_event("POST" if method == "POST" else "GET", path, None, headers)
    if "content-type" not in headers:
        event["headers"].pop("content-type", None)
    event["requestContext"]["http"]["method"] = method
    if body is not None:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"], event["isBase64Encoded"] = base64.b64encode(body).decode(), True
    return event


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(method=methods, path=paths, body=bodies, content_type=content_types, key=keys, odd_header=st.text(max_size=20))
def test_no_input_reaches_a_500(
    app: APIGatewayHttpResolver,
    method: str,
    path: str,
    body: bytes | None,
    content_type: str | None,
    key: str | None,
    odd_header: str,
) -> None:
    response = api_gate.handle(app, event_for(method, path, body, content_type, key, odd_header), None)
    status = response["statusCode"]
    assert status < 500, response
    if status >= 400 and method != "HEAD":  # HEAD answers as GET without a body
        doc = json.loads(response["body"])
        assert list(doc) == ["error"] and set(doc["error"]) == {"code", "message", "reason"}, doc
        assert doc["error"]["code"] and doc["error"]["message"]
    allowed = KNOWN.get(path)
    if allowed and method == "OPTIONS":
        assert status == 204, response  # a CORS preflight
    elif allowed and method != allowed and not (method == "HEAD" and allowed == "GET"):
        assert status == 405 and response["headers"]["Allow"] == allowed, response
    if status == 202:
        assert method == "POST" and json.loads(response["body"])["deadlineAt"]


def test_the_documents_state_the_fuzz_runs_figures() -> None:
    from stack_template import REPO_ROOT

    text = " ".join((REPO_ROOT / "docs" / "api.md").read_text().split())
    figures = f"sends {EXAMPLES:,} generated requests per run, bodies up to {WIDEST_KEYS:,} keys"
    assert figures.replace(",0", " 0") in text
    assert f"over {api_gate.MAX_POST_BODY_BYTES // 1024} KiB is refused unread" in text
