"""Admission slots are freed by the workflow when a job ends, whoever polls: for failed jobs too.

The review tried it as a new user would: ``RecipeConcurrency=3``, a model that answers 503, three jobs
that end FAILED while nobody polls, then a fourth POST: 429 TOO_MANY_JOBS, because the Pass states on the
failure paths rebuilt the state without the slot (and on AWS the role could not delete it anyway)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from chuixiang.stores.jobs import admission_key
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..scaled import SCALED
from ..waiting import wait_until

LIMIT = 3


@pytest.fixture(scope="module")
def small_cloud(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    work = tmp_path_factory.mktemp("slots")
    overrides = {**SCALED, "RecipeConcurrency": str(LIMIT)}
    with (
        open(work / "functions.log", "w") as log,
        LocalCloud(overrides, model_base_url=module_fake.base_url, work_dir=Path(work), log=log) as c,
    ):
        yield c


def _slots_held(cloud: LocalCloud) -> list[str]:
    table = cloud.job_store().table
    return [
        str(table.get_item(Key=admission_key(n)).get("Item", {}).get("jobId"))
        for n in range(LIMIT)
        if "Item" in table.get_item(Key=admission_key(n))
    ]


def _ended_unpolled(cloud: LocalCloud, job_ids: list[str]) -> None:
    """Every job terminal and its execution ended, read from the table and the executions: no GET, which
    would free a slot on its own."""
    store = cloud.job_store()
    wait_until(
        lambda: all((store.get(j) or {}).get("status") in ("FAILED", "SUCCEEDED") for j in job_ids),
        timeout_s=60,
        what="the jobs to end",
    )
    wait_until(lambda: not cloud.running_executions(), timeout_s=30, what="their executions to end")


def test_failed_jobs_free_their_slots_without_a_poll(small_cloud: LocalCloud, module_fake: FakeModel) -> None:
    api = LocalApi(small_cloud)
    module_fake.chat_by_model[small_cloud.template.parameters["RecipeModel"]] = ChatBehaviour(status=503)
    try:
        jobs = []
        for n in range(LIMIT):
            status, doc = api.post_dish(f"失败的菜{n}")
            assert status == 202, doc
            jobs.append(doc["jobId"])
        _ended_unpolled(small_cloud, jobs)
    finally:
        module_fake.chat_by_model.clear()
    assert all(small_cloud.job_store().get(j)["error"]["code"] == "RECIPE_UPSTREAM_ERROR" for j in jobs)
    assert _slots_held(small_cloud) == []
    status, doc = api.post_dish("第四个菜")
    assert status == 202, doc


def test_a_job_the_workflow_finds_invalid_frees_its_slot(small_cloud: LocalCloud) -> None:
    """The API validates the dish first, so only a disagreement between the two reaches InvalidDish with a
    slot: played here by taking the slot as the API does, then starting the execution with a bad dish."""
    store = small_cloud.job_store()
    job_id = "0badc0de-0000-4000-8000-0000000000b1"
    slot, _ = store.admit(job_id, until=2**31, limit=LIMIT)
    assert slot is not None
    store.create(job_id, "坏菜", slot=slot)
    small_cloud.client("stepfunctions").start_execution(
        stateMachineArn=small_cloud.state_machine_arn, name=job_id, input=json.dumps({"jobId": job_id, "dish": "\x00"})
    )
    _ended_unpolled(small_cloud, [job_id])
    assert store.get(job_id)["error"]["code"] == "INVALID_DISH"
    assert job_id not in _slots_held(small_cloud)
