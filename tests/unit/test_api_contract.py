"""The API's contract on an in-process moto backend: idempotency, admission, the OpenAPI document."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from chuixiang import api, api_gate
from chuixiang.settings import get_settings

from ..support.api_on_moto import api_on_moto
from ..support.lambda_doubles import Context, api_event


@pytest.fixture(scope="module")
def app() -> Iterator[APIGatewayHttpResolver]:
    with api_on_moto(max_jobs=20, name="fuzz-jobs") as resolver:  # the default: 429s are answers too
        yield resolver


def test_idempotency_key_reused_for_another_dish_is_422() -> None:
    with api_on_moto(max_jobs=20, name="idempotency-jobs") as app:
        _idempotency_checks(app)


def _idempotency_checks(app: APIGatewayHttpResolver) -> None:
    def post(dish: str, key: str) -> dict[str, Any]:
        event = api_event("POST", "/recipes", json.dumps({"dish": dish}, ensure_ascii=False), {"idempotency-key": key})
        context = Context("api", 512, "req", int(time.time() * 1000) + 10_000)  # as Lambda passes one
        return api_gate.handle(app, event, context)

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

    checked_in = (Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text()
    assert json.loads(checked_in) == json.loads(api.openapi_json(app)), "docs/openapi.json drifted: make openapi"
    doc = json.loads(checked_in)
    statuses = {code for ops in doc["paths"].values() for op in ops.values() for code in op["responses"]}
    assert statuses >= {"200", "202", "400", "404", "405", "409", "415", "422", "429", "503"}
    served = api_gate.handle(app, api_event("GET", "/openapi.json"), None)
    assert served["statusCode"] == 200 and json.loads(served["body"]) == doc


def test_admission_answers_429_with_retry_after_and_frees_the_slot_at_the_end() -> None:
    from chuixiang.job_status import JobStatus
    from chuixiang.stores.jobs import JobStore

    with api_on_moto(max_jobs=2, name="admission-jobs") as resolver:

        def post(dish: str) -> dict[str, Any]:
            return api_gate.handle(
                resolver, api_event("POST", "/recipes", json.dumps({"dish": dish}, ensure_ascii=False)), None
            )

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
        assert api_gate.handle(resolver, api_event("GET", f"/recipes/{job_id}"), None)["statusCode"] == 200
        assert post("丙菜")["statusCode"] == 202
