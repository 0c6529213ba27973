"""A job is readable only by the callers who created or joined it (with the JWT authorizer on): another
caller gets the same 404 as for a job that does not exist, and a cached picture's key names no job."""

from __future__ import annotations

import json
from typing import Any

from chuixiang_local.gateway.api_client import LocalApi, http_event
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.waiting import wait_until


def _as(claims: dict[str, str], event: dict[str, Any]) -> dict[str, Any]:
    event["requestContext"]["authorizer"] = {
        "jwt": {"claims": {"iss": "https://login.example.cn", **claims}, "scopes": None}
    }
    return event


def post(api: LocalApi, claims: dict[str, str], dish: str) -> tuple[int, dict[str, Any]]:
    answer = api.invoke(_as(claims, http_event("POST", "/recipes", json.dumps({"dish": dish}, ensure_ascii=False))))
    return answer["statusCode"], json.loads(answer["body"])


def get(api: LocalApi, claims: dict[str, str], job_id: str) -> tuple[int, dict[str, Any]]:
    answer = api.invoke(_as(claims, http_event("GET", f"/recipes/{job_id}")))
    return answer["statusCode"], json.loads(answer["body"])


ALICE, BOB, CAROL = {"sub": "alice"}, {"sub": "bob"}, {"sub": "carol"}


def test_a_job_is_its_creators_and_joiners_only(api: LocalApi, module_fake: FakeModel) -> None:
    module_fake.chat_script.append(ChatBehaviour(headers_delay_s=1.0))  # alice's job still runs when bob asks
    status, created = post(api, ALICE, "只给爱丽丝的菜")
    assert status == 202, created
    job_id = created["jobId"]
    missing = get(api, BOB, "0badc0de-0000-4000-8000-0000000000c1")
    assert get(api, BOB, job_id) == missing and missing[0] == 404  # the same answer as for no job at all
    status, joined = post(api, BOB, "只给爱丽丝的菜")  # the same dish while it runs: bob joins the job
    assert status == 202 and joined["jobId"] == job_id
    wait_until(
        lambda: get(api, ALICE, job_id)[1]["status"] == "SUCCEEDED", timeout_s=30, what="the job", interval_s=0.1
    )
    assert get(api, BOB, job_id)[0] == 200 and get(api, CAROL, job_id)[0] == 404


def test_a_cached_picture_names_no_other_callers_job(api: LocalApi) -> None:
    first = post(api, ALICE, "缓存的菜")[1]["jobId"]
    wait_until(
        lambda: get(api, ALICE, first)[1]["status"] == "SUCCEEDED", timeout_s=30, what="the first job", interval_s=0.1
    )
    second = post(api, CAROL, "缓存的菜")[1]["jobId"]  # served from the recipe cache, the same picture
    doc = wait_until(
        lambda: (d := get(api, CAROL, second)[1])["status"] == "SUCCEEDED" and d,
        timeout_s=30,
        what="the cached job",
        interval_s=0.1,
    )
    assert second != first and doc["image"]["key"] and first not in json.dumps(doc), doc


def test_a_token_without_sub_is_its_client(api: LocalApi) -> None:
    """A client-credentials token (no ``sub``, a ``client_id``): the client is the caller."""
    job_id = post(api, {"client_id": "kitchen-backend"}, "机器的菜")[1]["jobId"]
    assert get(api, {"client_id": "kitchen-backend"}, job_id)[0] == 200
    assert get(api, {"client_id": "another-backend"}, job_id)[0] == 404 and get(api, ALICE, job_id)[0] == 404


def test_a_sub_that_spells_a_client_id_is_not_that_client(api: LocalApi) -> None:
    """Caller ids have namespaces: a user whose ``sub`` is ``client:kitchen-backend`` is ``sub:client:…``, not the
    client ``kitchen-backend`` (before, both were ``client:kitchen-backend`` and read each other's jobs)."""
    job_id = post(api, {"client_id": "kitchen-backend"}, "机器的另一道菜")[1]["jobId"]
    assert get(api, {"sub": "client:kitchen-backend"}, job_id)[0] == 404
    mine = post(api, {"sub": "client:kitchen-backend"}, "用户的菜")[1]["jobId"]
    assert get(api, {"client_id": "kitchen-backend"}, mine)[0] == 404
    assert get(api, {"sub": "client:kitchen-backend"}, mine)[0] == 200


def test_a_job_kept_from_before_namespaces_is_still_its_owners(api: LocalApi) -> None:
    """Jobs stored with the bare ``sub`` as their owner (before caller ids had namespaces) stay readable by it."""
    job_id = post(api, ALICE, "旧的菜")[1]["jobId"]
    api.cloud.job_store().table.update_item(
        Key={"pk": f"JOB#{job_id}"}, UpdateExpression="SET owners = :o", ExpressionAttributeValues={":o": {"alice"}}
    )
    assert get(api, ALICE, job_id)[0] == 200 and get(api, BOB, job_id)[0] == 404
