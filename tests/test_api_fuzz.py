"""No input reaches a 500: thousands of generated requests against the api function's handler.

Hypothesis builds HTTP API events from hostile parts - any method on known and
unknown paths, any content type, bodies that are not UTF-8, not JSON, nested
thousands deep, the right shape with wrong values, headers with odd bytes and
oversized Idempotency-Keys - and every answer must be a 2xx or a 4xx in the one
error shape. The backend is moto in-process (executions are recorded, not run).
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.core.config import default_user_config

from chuixiang import api
from chuixiang.settings import get_settings
from chuixiang_local.api_client import http_event
from chuixiang_local.context import LocalContext
from chuixiang_local.template import Template

EXAMPLES = 2000
KNOWN = {"/recipes": "POST", "/recipes/": "POST", "/openapi.json": "GET"}
#: The template's default CorsAllowOrigins: a preflight (OPTIONS) on a known path is answered, not refused.
CORS_ORIGINS = Template().parameters["CorsAllowOrigins"]


@contextlib.contextmanager
def api_on_moto(max_jobs: int, name: str) -> Iterator[APIGatewayHttpResolver]:
    """The api function's app on an in-process moto table and state machine."""
    patch = pytest.MonkeyPatch()
    patch.delenv("AWS_ENDPOINT_URL", raising=False)
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "JOBS_TABLE": name,
                       "IMAGES_BUCKET": name, "MAX_JOBS_IN_FLIGHT": str(max_jobs),
                       "CORS_ALLOW_ORIGINS": CORS_ORIGINS}.items():  # as deployed, whatever ran before
        patch.setenv(key, value)
    patch.setitem(default_user_config, "stepfunctions", {"execute_state_machine": False})
    with mock_aws():
        boto3.resource("dynamodb").create_table(
            TableName=name, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        boto3.client("s3").create_bucket(Bucket=name)
        arn = boto3.client("stepfunctions").create_state_machine(
            name=name, definition='{"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}}',
            roleArn="arn:aws:iam::123456789012:role/fuzz")["stateMachineArn"]
        patch.setenv("STATE_MACHINE_ARN", arn)
        get_settings.cache_clear()
        api._sfn.cache_clear()
        api._idempotency_store.cache_clear()
        yield api.build_app(APIGatewayHttpResolver)
    get_settings.cache_clear()
    api._sfn.cache_clear()
    api._idempotency_store.cache_clear()
    patch.undo()


@pytest.fixture(scope="module")
def app() -> Iterator[APIGatewayHttpResolver]:
    with api_on_moto(max_jobs=20, name="fuzz-jobs") as resolver:  # the default: 429s are answers too
        yield resolver


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=60),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
dishes = st.one_of(st.text(max_size=50), st.sampled_from(["番茄炒蛋", " 宫保鸡丁 ", "\x00", "a" * 41, "🍅炒蛋"]))
bodies = st.one_of(
    st.none(),
    st.binary(max_size=64),  # not UTF-8, not JSON
    st.builds(lambda d: json.dumps({"dish": d}, ensure_ascii=False).encode(), dishes),
    st.builds(lambda v: json.dumps(v).encode(), json_values),
    st.builds(lambda d, extra: json.dumps({"dish": d, **extra}).encode(), dishes,
              st.dictionaries(st.text(max_size=6), json_values, max_size=2)),
    st.builds(lambda n: b"[" * n + b"]" * n, st.integers(900, 5000)),  # nested deeper than the parser
    st.builds(lambda n: b'{"dish": ' + b"[" * n, st.integers(1, 3000)),  # truncated
)
content_types = st.one_of(
    st.none(), st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain",
                                "multipart/form-data", "multipart/form-data; boundary=x",
                                "application/x-www-form-urlencoded", "APPLICATION/JSON", ""]),
    st.text(max_size=30))
keys = st.one_of(st.none(), st.text(max_size=200), st.from_regex(r"[A-Za-z0-9-]{1,140}", fullmatch=True))
paths = st.one_of(st.sampled_from(["/recipes", "/recipes/", "/openapi.json", "/", "/swagger", "/recipes/x/y"]),
                  st.builds(lambda s: "/recipes/" + s, st.text(min_size=1, max_size=80).filter(lambda s: "/" not in s)),
                  st.builds(lambda s: "/" + s, st.text(max_size=30)))
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"])


def event_for(method: str, path: str, body: bytes | None, content_type: str | None, key: str | None,
              odd_header: str) -> dict[str, Any]:
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


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(method=methods, path=paths, body=bodies, content_type=content_types, key=keys,
       odd_header=st.text(max_size=20))
def test_no_input_reaches_a_500(app: APIGatewayHttpResolver, method: str, path: str, body: bytes | None,
                                content_type: str | None, key: str | None, odd_header: str) -> None:
    response = api.handle(app, event_for(method, path, body, content_type, key, odd_header), None)
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


def test_idempotency_key_reused_for_another_dish_is_422() -> None:
    with api_on_moto(max_jobs=20, name="idempotency-jobs") as app:
        _idempotency_checks(app)


def _idempotency_checks(app: APIGatewayHttpResolver) -> None:
    def post(dish: str, key: str) -> dict[str, Any]:
        event = http_event("POST", "/recipes", json.dumps({"dish": dish}, ensure_ascii=False),
                           {"idempotency-key": key})
        context = LocalContext("api", 512, "req", int(time.time() * 1000) + 10_000, "")  # as Lambda passes one
        return api.handle(app, event, context)

    first, again = post("红烧肉", "key-1"), post("红烧肉", "key-1")
    assert first["statusCode"] == again["statusCode"] == 202
    assert json.loads(first["body"])["jobId"] == json.loads(again["body"])["jobId"]
    other = post("鱼香肉丝", "key-1")
    assert other["statusCode"] == 422
    assert json.loads(other["body"])["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
    too_long = post("红烧肉", "k" * 129)
    assert too_long["statusCode"] == 400
    assert json.loads(too_long["body"])["error"]["code"] == "INVALID_IDEMPOTENCY_KEY"


def test_openapi_document_is_checked_in_and_current(app: APIGatewayHttpResolver) -> None:
    from pathlib import Path

    checked_in = (Path(__file__).resolve().parents[1] / "docs" / "openapi.json").read_text()
    assert json.loads(checked_in) == json.loads(api.openapi_json(app)), "docs/openapi.json drifted: make openapi"
    doc = json.loads(checked_in)
    statuses = {code for ops in doc["paths"].values() for op in ops.values() for code in op["responses"]}
    assert statuses >= {"200", "202", "400", "404", "405", "409", "415", "422", "429", "503"}
    served = api.handle(app, http_event("GET", "/openapi.json"), None)
    assert served["statusCode"] == 200 and json.loads(served["body"]) == doc


def test_admission_answers_429_with_retry_after_and_frees_the_slot_at_the_end() -> None:
    from chuixiang.job_status import JobStatus
    from chuixiang.stores.jobs import JobStore

    with api_on_moto(max_jobs=2, name="admission-jobs") as resolver:
        def post(dish: str) -> dict[str, Any]:
            return api.handle(resolver, http_event("POST", "/recipes", json.dumps({"dish": dish},
                                                                               ensure_ascii=False)), None)

        first, second, third = post("甲菜"), post("乙菜"), post("丙菜")
        assert first["statusCode"] == second["statusCode"] == 202
        assert third["statusCode"] == 429, third
        assert json.loads(third["body"])["error"]["code"] == "TOO_MANY_JOBS"
        assert 1 <= int(third["headers"]["Retry-After"]) <= 30
        joined = post("甲菜")  # the same dish joins its running job: no slot needed
        assert joined["statusCode"] == 202
        assert json.loads(joined["body"])["jobId"] == json.loads(first["body"])["jobId"]
        # The first job ends; the client's next poll sees it and frees its slot.
        job_id = json.loads(first["body"])["jobId"]
        JobStore(get_settings()).update(job_id, status=JobStatus.SUCCEEDED)
        assert api.handle(resolver, http_event("GET", f"/recipes/{job_id}"), None)["statusCode"] == 200
        assert post("丙菜")["statusCode"] == 202
