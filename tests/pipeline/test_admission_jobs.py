"""Admission by jobs through the API and the local cloud (the template's default ``auto``): a burst of
``RecipeConcurrency`` callers is all admitted, a job written in sections counts once in its caller's share for its
whole life, and a caller cooking dish after dish is never refused (a finished job's slot is free by the time the
caller reads its status)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import SCALED
from ..support.waiting import wait_until

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

#: As many callers at once as slots: enough for a pass wider than one job's own slot to turn callers away (the 11
#: streams a pass opened took 11 slots), half of the 30 this test began with (each job written in sections: ~0.5 s
#: of CPU each on two busy cores).
BURST = 16
ROOMY = {"RecipeIdleTimeoutMs": "2000", "RecipeFirstContentTimeoutMs": "2500"}
#: How a job of the burst may end besides SUCCEEDED: cut by a scaled limit on a loaded machine (never by admission).
CUT_BY_LOAD = {"RECIPE_TIMEOUT", "RECIPE_UPSTREAM_ERROR", "JOB_TIMED_OUT"}


@pytest.fixture(scope="module")
def cloud(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    work = tmp_path_factory.mktemp("jobs")
    overrides = {**SCALED, **ROOMY, "RecipeConcurrency": str(BURST), "RecipeConcurrencyPerCaller": "2"}
    with (
        open(work / "functions.log", "w") as log,
        LocalCloud(overrides, model_base_url=module_fake.base_url, work_dir=Path(work), log=log) as c,
    ):
        yield c


@pytest.fixture(autouse=True)
def _settled(cloud: LocalCloud, module_fake: FakeModel) -> Iterator[None]:
    yield
    module_fake.chat_by_section.clear()
    wait_until(lambda: not cloud.running_executions(), timeout_s=120, what="executions to end")


def test_a_burst_of_recipe_concurrency_callers_is_all_admitted(cloud: LocalCloud) -> None:
    """BURST callers at once, as many slots: every POST gets 202 (at 30, the wide passes of before admitted 10
    and refused 20: a pass took 11 slots before its outline had written a title)."""
    api = LocalApi(cloud)
    answers = [api.post_dish(f"突发的菜{n}", source_ip=f"10.0.2.{n + 1}") for n in range(BURST)]
    assert [status for status, _ in answers] == [202] * BURST, [doc for status, doc in answers if status != 202][:2]
    # Every admitted job ends (none lost, none stuck). Sixteen jobs' workers starting at once on two busy cores
    # may cut some at the scaled limits (a model's timeout, never admission's or a crash): what admission owes
    # them is a start and a slot given back, which the next job shows.
    ended = [api.wait(doc["jobId"], give_up_s=120) for _, doc in answers]
    codes = {(d.get("error") or {}).get("code") for d in ended if d["status"] == "FAILED"}
    assert all(d["status"] in ("SUCCEEDED", "FAILED") for d in ended)
    assert codes <= CUT_BY_LOAD, codes
    # The next job is admitted (every slot was taken) and written. A scaled limit may cut it as it cut the burst's
    # on a loaded machine (a full CI run: FAILED once), so it is asked again then: a stack the burst left broken
    # fails both.
    for attempt in range(2):
        status, after = api.post_dish(f"突发之后的菜{attempt}", source_ip="10.0.2.200")
        assert status == 202, after
        doc = api.wait(after["jobId"], give_up_s=60)
        if doc["status"] == "SUCCEEDED":
            break
        assert (doc.get("error") or {}).get("code") in CUT_BY_LOAD, doc
    assert doc["status"] == "SUCCEEDED", doc


def test_a_job_in_sections_counts_once_in_its_callers_share_for_its_whole_life(
    cloud: LocalCloud, module_fake: FakeModel
) -> None:
    """Two jobs of one caller, written in sections, each outline slow (~1.5 s, half the scaled 3 s a call may
    take: at ~2 s a busy machine timed it out): the caller's third POST is refused early in them and late in them
    (a scaled 5 s and 12 s of a 140 s stage)."""
    module_fake.chat_by_section["outline"] = ChatBehaviour(chunk_delay_s=0.015)
    api, me = LocalApi(cloud), "10.0.3.1"
    try:
        started = time.monotonic()
        jobs = [api.post_dish(f"分段的菜{n}", source_ip=me) for n in range(2)]
        assert [s for s, _ in jobs] == [202, 202], jobs
        for at_s in (0.3, 1.0):
            wait_until(partial(_past, started, at_s), timeout_s=5, what=f"{at_s} s into the jobs")
            status, third = api.post_dish(f"第三道菜{at_s}", source_ip=me)
            assert status == 429 and "share" in third["error"]["reason"], (at_s, third)
        done = [api.wait(doc["jobId"], give_up_s=90) for _, doc in jobs]
    finally:
        module_fake.chat_by_section.clear()
    assert [d["status"] for d in done] == ["SUCCEEDED", "SUCCEEDED"], [(d["status"], d.get("error")) for d in done]
    assert {d["metrics"]["recipe"]["mode"] for d in done} <= {"parallel", "whole"}
    assert any(d["metrics"]["recipe"].get("sections") for d in done)  # written in sections, the subject here


def _past(started: float, seconds: float) -> bool:
    return time.monotonic() - started >= seconds


def test_one_caller_cooks_five_dishes_back_to_back_without_a_429(cloud: LocalCloud) -> None:
    api, me = LocalApi(cloud), "10.0.4.1"
    for n in range(5):
        status, doc = api.post_dish(f"一道接一道{n}", source_ip=me)
        assert status == 202, (n, doc)
        assert api.wait(doc["jobId"], give_up_s=90)["status"] == "SUCCEEDED"


def test_a_post_refused_then_admitted_counts_the_users_wait_from_the_first_post(cloud: LocalCloud) -> None:
    """The caller's share is full: its POST gets 429. The same request (its Idempotency-Key) admitted later is one
    user waiting since the first POST: the job carries ``askedAt``, and ``JobLatencyMs`` (the "job ended" line's
    ``waitedMs``) counts from it, the time spent queued included."""
    api, me = LocalApi(cloud), "10.0.4.1"
    held = [api.post_dish(f"占着份额的菜{n}", source_ip=me)[1]["jobId"] for n in range(2)]
    key = str(uuid.uuid4())
    refused_at = time.time()
    status, doc = api.post_dish("排过队的菜", idempotency_key=key, source_ip=me)
    assert status == 429, doc
    for job in held:
        api.wait(job, give_up_s=60)
    status, doc = api.post_dish("排过队的菜", idempotency_key=key, source_ip=me)
    assert status == 202, doc
    queued_s = time.time() - refused_at
    assert api.wait(doc["jobId"], give_up_s=60)["status"] == "SUCCEEDED"
    item = cloud.job_store().get(doc["jobId"]) or {}
    assert item["askedAt"] < item["createdAt"]
    log = Path(cloud.log.name) if cloud.log else None
    assert log is not None
    [ended] = [
        r
        for r in map(_json_or_none, log.read_text().splitlines())
        if r and r.get("message") == "job ended" and r.get("jobId") == doc["jobId"]
    ]
    assert ended["waitedMs"] >= queued_s * 1000 - 100, (ended["waitedMs"], queued_s)


def _json_or_none(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
