"""Admission slots are freed by the workflow when a job ends, whoever polls: for failed jobs too; and a
caller gets its share and waits its turn, through the API.

The review tried it as a new user would: ``RecipeConcurrency=3``, a model that answers 503, three jobs
that end FAILED while nobody polls, then a fourth POST: 429 TOO_MANY_JOBS, because the Pass states on the
failure paths rebuilt the state without the slot (and on AWS the role could not delete it anyway)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from chuixiang.errors import ErrorCode
from chuixiang.stores.admission import Admission, slot_key
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import SCALED, WHOLE
from ..support.waiting import wait_until

LIMIT = 3


#: This module's subject is admission, not the text limits (tests/sockets holds those to their bound on real
#: sockets). Its fake model serves from this test process, beside moto's server and the api handler (one GIL):
#: on a loaded 2-core machine a stream stalled past the scaled 1 s idle limit (a fresh-clone CI run: dave's job
#: ended RECIPE_TIMEOUT, "no text for 1000 ms after 41094 bytes"). Limits that still pass the ladder, with room.
ROOMY = {"RecipeIdleTimeoutMs": "2000", "RecipeFirstContentTimeoutMs": "2500"}


@pytest.fixture(scope="module")
def small_cloud(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    work = tmp_path_factory.mktemp("slots")
    overrides = {**SCALED, **WHOLE, "RecipeConcurrency": str(LIMIT), "RecipeConcurrencyPerCaller": "1", **ROOMY}
    with (
        open(work / "functions.log", "w") as log,
        LocalCloud(overrides, model_base_url=module_fake.base_url, work_dir=Path(work), log=log) as c,
    ):
        yield c


@pytest.fixture(autouse=True)
def _clean(small_cloud: LocalCloud) -> Iterator[None]:
    """Each test starts with no job running, every slot free and nobody in line, whatever ran before it
    (another test's last job may still be cooking), and leaves it so."""
    _settle(small_cloud)
    yield
    _settle(small_cloud)


def _settle(cloud: LocalCloud) -> None:
    wait_until(lambda: not cloud.running_executions(), timeout_s=60, what="executions to end")
    _clear_admission(cloud)
    # A test that fails the model opens its breaker; the next test's jobs would then fail at once, giving their
    # slots back while the test still counts on them (seen: test_failed_jobs… before test_stopped_jobs…).
    cloud.reset_breakers()


def _slots_held(cloud: LocalCloud) -> list[str]:
    table = cloud.job_store().table
    return [
        str(table.get_item(Key=slot_key(n)).get("Item", {}).get("jobId"))
        for n in range(LIMIT)
        if "Item" in table.get_item(Key=slot_key(n))
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
            status, doc = api.post_dish(f"失败的菜{n}", source_ip=f"10.0.0.{n + 1}")
            assert status == 202, doc
            jobs.append(doc["jobId"])
        _ended_unpolled(small_cloud, jobs)
    finally:
        module_fake.chat_by_model.clear()
    assert all((small_cloud.job_store().get(j) or {})["error"]["code"] == "RECIPE_UPSTREAM_ERROR" for j in jobs)
    assert _slots_held(small_cloud) == []
    status, doc = api.post_dish("第四个菜")
    assert status == 202, doc


def test_a_job_the_workflow_finds_invalid_frees_its_slot(small_cloud: LocalCloud) -> None:
    """The API validates the dish first, so only a disagreement between the two reaches InvalidDish with a
    slot: played here by taking the slot as the API does, then starting the execution with a bad dish."""
    store = small_cloud.job_store()
    job_id = "0badc0de-0000-4000-8000-0000000000b1"
    slot = Admission(store.table, LIMIT).admit(job_id, "a-test", until=2**31)
    assert isinstance(slot, int)
    store.create(job_id, "坏菜", slot=slot)
    small_cloud.client("stepfunctions").start_execution(
        stateMachineArn=small_cloud.state_machine_arn, name=job_id, input=json.dumps({"jobId": job_id, "dish": "\x00"})
    )
    _ended_unpolled(small_cloud, [job_id])
    assert (store.get(job_id) or {})["error"]["code"] == "INVALID_DISH"
    assert job_id not in _slots_held(small_cloud)


def _clear_admission(cloud: LocalCloud) -> None:
    """Every slot free and nobody in line: the module's other tests start clean, in whatever order."""
    table = cloud.job_store().table
    for item in table.scan(ProjectionExpression="pk")["Items"]:
        if str(item["pk"]).startswith("ADMISSION#"):
            table.delete_item(Key={"pk": item["pk"]})


def test_a_caller_gets_its_share_and_waits_its_turn(small_cloud: LocalCloud) -> None:
    """One job per caller (``RecipeConcurrencyPerCaller=1``), callers told apart by source address. Once a slot
    is owed to a caller in line, neither the caller whose job just ended nor a newcomer takes it."""
    api, store = LocalApi(small_cloud), small_cloud.job_store()
    small_cloud.reset_breakers()  # the failing model of another test may have opened them
    alice, dave, erin = "10.0.1.1", "10.0.1.4", "10.0.1.5"
    status, first = api.post_dish("爱丽丝的菜", source_ip=alice)
    assert status == 202, first
    status, again = api.post_dish("爱丽丝的第二道菜", source_ip=alice)
    assert status == 429 and "share" in again["error"]["reason"], again
    for n in range(LIMIT - 1):  # every other slot held by someone else's long job
        assert isinstance(Admission(store.table, LIMIT).admit(f"held-{n}", "another-caller", 2**31), int)
    status, waiting = api.post_dish("戴夫的菜", source_ip=dave)
    assert status == 429 and "waiting" in waiting["error"]["reason"], waiting
    assert api.wait(first["jobId"], give_up_s=30)["status"] == "SUCCEEDED"  # alice's slot is free now…
    status, cut_in = api.post_dish("爱丽丝的第二道菜", source_ip=alice)
    assert status == 429, cut_in  # …but owed to dave, who was refused before alice came back
    assert api.post_dish("艾琳的菜", source_ip=erin)[0] == 429
    status, turn = api.post_dish("戴夫的菜", source_ip=dave)
    assert status == 202, turn
    assert api.wait(turn["jobId"], give_up_s=30)["status"] == "SUCCEEDED"


def test_stopped_jobs_nobody_polls_free_their_slots_at_once(small_cloud: LocalCloud, module_fake: FakeModel) -> None:
    """An operator stops every running job and nobody polls them: the reconciler fails each job and frees its
    slot, so the next caller is admitted within seconds, not at the lease's end (StateMachineTimeout + 60 s)."""
    api = LocalApi(small_cloud)
    module_fake.chat_by_model[small_cloud.template.parameters["RecipeModel"]] = ChatBehaviour(headers_delay_s=30)
    sfn = small_cloud.client("stepfunctions")
    try:
        jobs = []
        for n in range(LIMIT):
            status, doc = api.post_dish(f"被停下的菜{n}", source_ip=f"10.0.1.{n + 1}")
            assert status == 202, doc
            jobs.append(doc["jobId"])
        assert api.post_dish("没有位置的菜", source_ip="10.0.1.99")[0] == 429
        for job_id in jobs:
            sfn.stop_execution(executionArn=small_cloud.execution_arn(job_id), error="Operator", cause="test")
        _ended_unpolled(small_cloud, jobs)
        wait_until(lambda: _slots_held(small_cloud) == [], timeout_s=10, what="the reconciler to free the slots")
    finally:
        module_fake.chat_by_model.clear()
    status, doc = api.post_dish("下一位的菜", source_ip="10.0.1.100")
    assert status == 202, doc


def test_a_job_made_terminal_elsewhere_frees_its_slot_when_its_workflow_ends(small_cloud: LocalCloud) -> None:
    """The job is failed by something else while its workflow runs (the workflow's own write then loses its
    condition, MarkFailed or Finalize): the workflow still frees the slot the job holds."""
    api = LocalApi(small_cloud)
    status, doc = api.post_dish("别处结束的菜", source_ip="10.0.2.1")
    assert status == 202, doc
    job_id, store = doc["jobId"], small_cloud.job_store()
    wait_until(lambda: (store.get(job_id) or {}).get("status") == "RUNNING", timeout_s=15, what="the job runs")
    assert store.fail(job_id, ErrorCode.INTERNAL, "made terminal elsewhere")  # frees nothing itself
    wait_until(lambda: not small_cloud.running_executions(), timeout_s=60, what="its workflow to end")
    assert job_id not in _slots_held(small_cloud)
