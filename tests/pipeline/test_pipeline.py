"""The real ASL through the local engine: cache, degraded image, and no job left unfinished."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from stack_template import Template

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, ImageBehaviour

from ..support.scaled import SCALED
from ..support.waiting import wait_until

# 15 s or more in all, scheduled first (tests/conftest.py); mostly waiting on the scaled limits: its own lane
pytestmark = [pytest.mark.long_module, pytest.mark.waiting]

HANG = Path(__file__).parents[1] / "lambdas" / "hang"
CRASH = Path(__file__).parents[1] / "lambdas" / "crash"


def test_cached_dish_makes_no_model_call(api: LocalApi, module_fake: FakeModel) -> None:
    first = api.wait(api.post_dish("鱼香肉丝")[1]["jobId"], give_up_s=30)
    assert first["status"] == "SUCCEEDED"
    calls = (module_fake.count("/chat/completions"), module_fake.count("/images/generations"))
    second = api.wait(api.post_dish("鱼香肉丝 ")[1]["jobId"], give_up_s=30)
    assert second["status"] == "SUCCEEDED" and second["recipe"] == first["recipe"]
    assert second["image"]["key"] == first["image"]["key"]
    assert (module_fake.count("/chat/completions"), module_fake.count("/images/generations")) == calls


@pytest.mark.parametrize(
    ("script", "code", "attempts"),
    [
        ([ImageBehaviour(status=503), ImageBehaviour()], None, 2),
        ([ImageBehaviour(status=500, delay_s=0.8)], "IMAGE_UPSTREAM_ERROR", 1),
        ([ImageBehaviour(kind="garbage")], "IMAGE_INVALID", 1),
        ([ImageBehaviour(delay_s=30)], "IMAGE_TIMEOUT", 1),
    ],
)
def test_image_failure_degrades_the_job(
    api: LocalApi, module_fake: FakeModel, script: list[ImageBehaviour], code: str | None, attempts: int
) -> None:
    module_fake.image_script.extend(script)
    doc = api.wait(api.post_dish(f"图片测试{code}")[1]["jobId"], give_up_s=30)
    assert doc["status"] == "SUCCEEDED" and doc["recipe"] is not None, doc.get("error")
    assert doc["metrics"]["image"]["attempts"] == attempts == module_fake.count("/images/generations")
    if code is None:
        assert doc["image"] is not None and doc["imageError"] is None
    else:
        assert doc["image"] is None and doc["imageError"]["code"] == code and doc["imageError"]["message"]


def _execution(cloud: LocalCloud, job_id: str) -> dict[str, Any]:
    return cloud.describe_execution(cloud.execution_arn(job_id))


def _wait_reconciled(cloud: LocalCloud, arn: str, seconds: float = 15) -> None:
    wait_until(lambda: cloud.reconciled(arn), timeout_s=seconds, what="the reconciler saw the execution end")


def test_recipe_lambda_killed_at_timeout(cloud: LocalCloud, api: LocalApi) -> None:
    spec = cloud.functions["RecipeFunction"]
    saved = spec.code_dir
    spec.code_dir = HANG
    try:
        started = time.monotonic()
        doc = api.wait(api.post_dish("卡住的菜")[1]["jobId"], give_up_s=30)
    finally:
        spec.code_dir = saved
    assert doc["status"] == "FAILED" and doc["error"]["code"] == "RECIPE_TIMEOUT"
    assert spec.timeout_s <= time.monotonic() - started <= spec.timeout_s + 4
    assert any(lid == "RecipeFunction" and inv.error_type == "Sandbox.Timedout" for lid, inv in cloud.invocations)


def test_state_timeout_fires_when_the_invoke_outlives_it(
    cloud: LocalCloud, api: LocalApi, scaled_template: Template
) -> None:
    """Lambda service trouble: the invoke hangs past the state's TimeoutSeconds -> States.Timeout."""
    spec = cloud.functions["ImageFunction"]
    saved = (spec.code_dir, spec.timeout_s)
    spec.code_dir, spec.timeout_s = HANG, 60
    try:
        started = time.monotonic()
        doc = api.wait(api.post_dish("画不出来的菜")[1]["jobId"], give_up_s=40)
    finally:
        spec.code_dir, spec.timeout_s = saved
    elapsed = time.monotonic() - started
    state_timeout = scaled_template.function_by_dir("image").timeout_s + 5
    assert doc["status"] == "SUCCEEDED" and doc["imageError"]["code"] == "IMAGE_TIMEOUT"
    assert state_timeout <= elapsed <= state_timeout + 8  # + submit and recipe stages before it


def test_an_image_stage_that_crashes_serves_the_recipe_with_image_internal(cloud: LocalCloud, api: LocalApi) -> None:
    """A bug in the image function is not the image model's failure: IMAGE_INTERNAL (it said
    IMAGE_UPSTREAM_ERROR, sending the on-call to the provider)."""
    spec = cloud.functions["ImageFunction"]
    saved = spec.code_dir
    spec.code_dir = CRASH
    try:
        doc = api.wait(api.post_dish("画坏了的菜")[1]["jobId"], give_up_s=30)
    finally:
        spec.code_dir = saved
    assert doc["status"] == "SUCCEEDED" and doc["recipe"] and doc["imageError"]["code"] == "IMAGE_INTERNAL"


def test_execution_timeout_is_reconciled_to_job_timed_out(module_fake: FakeModel, tmp_path: Path) -> None:
    # A broken ladder on purpose (the CLI would refuse it): the Recipe state may run 35 s, the machine 12 s.
    overrides = {**SCALED, "RecipeFunctionTimeout": "30", "StateMachineTimeout": "12"}
    with (
        open(tmp_path / "log", "w") as log,
        LocalCloud(overrides, model_base_url=module_fake.base_url, work_dir=tmp_path, log=log) as c,
    ):
        spec = c.functions["RecipeFunction"]
        spec.code_dir = HANG
        api = LocalApi(c)
        job_id = api.post_dish("超时的菜")[1]["jobId"]
        wait_until(
            lambda: _execution(c, job_id)["status"] != "RUNNING",
            timeout_s=30,
            what="the execution ended",
            interval_s=0.2,
        )
        execution = _execution(c, job_id)
        assert execution["status"] == "TIMED_OUT"
        _wait_reconciled(c, execution["executionArn"])
        doc = api.get(job_id)[1]
    assert doc["status"] == "FAILED" and doc["error"]["code"] == "JOB_TIMED_OUT"


def test_aborted_execution_fails_the_job(cloud: LocalCloud, api: LocalApi, module_fake: FakeModel) -> None:
    module_fake.chat_script.append(ChatBehaviour(headers_delay_s=30))
    job_id = api.post_dish("被取消的菜")[1]["jobId"]
    wait_until(
        lambda: module_fake.count("/chat/completions"), timeout_s=15, what="the recipe call reached the model"
    )  # stop it mid-recipe
    assert module_fake.count("/chat/completions") == 1
    arn = _execution(cloud, job_id)["executionArn"]
    cloud.client("stepfunctions").stop_execution(executionArn=arn, error="Operator", cause="test")
    _wait_reconciled(cloud, arn)
    doc = api.get(job_id)[1]
    assert doc["status"] == "FAILED" and doc["error"]["code"] == "JOB_STOPPED"  # an operator's stop
    # Its recipe stage goes on until it learns the job ended, then closes the call, which the model notices while
    # still silent: let both happen, so that hang-up is this test's and not the next one's.
    wait_until(
        lambda: (api.get(job_id)[1]["metrics"].get("recipe") or {}).get("calls"),
        timeout_s=60,
        what="the stopped job's recipe stage ended",
    )
    wait_until(
        lambda: len(module_fake.hung_up) == module_fake.count("/chat/completions"),
        timeout_s=5,
        what="the model saw each call closed",
    )


def test_get_reconciles_a_job_past_its_deadline(cloud: LocalCloud, api: LocalApi) -> None:
    store = cloud.job_store()
    store.create("0badc0de-0000-4000-8000-000000000001", "没人管的菜")
    store.update("0badc0de-0000-4000-8000-000000000001", status="RUNNING", deadlineAt="2020-01-01T00:00:00.000Z")
    doc = api.get("0badc0de-0000-4000-8000-000000000001")[1]
    assert doc["status"] == "FAILED" and doc["error"]["code"] == "JOB_TIMED_OUT"


def test_direct_start_with_invalid_dish_fails_with_invalid_dish(cloud: LocalCloud, api: LocalApi) -> None:
    """The state machine validates too: a console start with a bad dish ends FAILED, not stuck."""
    job_id = "0badc0de-0000-4000-8000-000000000002"
    cloud.client("stepfunctions").start_execution(
        stateMachineArn=cloud.state_machine_arn, name=job_id, input=json.dumps({"jobId": job_id, "dish": "\x00"})
    )
    doc = api.wait(job_id, give_up_s=20)
    assert doc["status"] == "FAILED" and doc["error"]["code"] == "INVALID_DISH"


def test_a_stopped_execution_closes_the_model_call_and_caches_nothing(
    cloud: LocalCloud, api: LocalApi, module_fake: FakeModel
) -> None:
    """Stopped mid-stream, through what really happens: the execution is ABORTED at once (the task it ran
    goes on, as on AWS), EventBridge's rule hands the status change to the reconciler, which fails the job;
    the recipe Lambda's next progress write does not apply, and it closes the model's connection within one
    progress interval and a second of that. Nothing is written or cached (before: the execution said
    RUNNING until the stream ended, and the recipe was written and cached)."""
    interval_s = cloud.template.number("ProgressIntervalMs") / 1000
    dish = "写到一半的菜"

    def hung_up() -> list[float]:
        """When the model saw this job's calls closed (an earlier test's call may be closed meanwhile)."""
        with module_fake.lock:  # the two lists are appended together, under it
            closed = list(zip(module_fake.hung_up, module_fake.hung_up_asked, strict=True))
        return [t for (_, t, _), asked in closed if dish in asked]

    module_fake.chat_script.append(ChatBehaviour(chunk_delay_s=0.05))  # ~30 s of recipe
    job_id = api.post_dish(dish)[1]["jobId"]
    wait_until(
        lambda: (api.get(job_id)[1].get("progress") or {}).get("chars", 0) > 0,
        timeout_s=15,
        what="the model is writing",
    )
    arn = _execution(cloud, job_id)["executionArn"]
    cloud.client("stepfunctions").stop_execution(executionArn=arn, error="Operator", cause="test")
    assert cloud.describe_execution(arn)["status"] == "ABORTED"  # at once, while the recipe task still runs
    assert hung_up() == []
    _wait_reconciled(cloud, arn)
    reconciled_at = time.monotonic()
    assert (cloud.job_store().get(job_id) or {}).get("status") == "FAILED"
    wait_until(hung_up, timeout_s=interval_s + 5, what="the model call was closed")
    assert hung_up()[0] - reconciled_at < interval_s + 1.0
    doc = api.get(job_id)[1]
    assert doc["status"] == "FAILED" and doc["recipe"] is None and doc["stage"] == "recipe"
    wait_until(
        lambda: (api.get(job_id)[1]["metrics"].get("recipe") or {}).get("calls"),
        timeout_s=10,
        what="the recipe stage recorded its call",
    )
    assert api.get(job_id)[1]["metrics"]["recipe"]["calls"][-1]["outcome"] == "cancelled", api.get(job_id)[1]["metrics"]
    assert cloud.recipe_cache().get(dish) is None


def test_a_recipe_worker_killed_mid_stream_leaves_the_tokens_it_streamed(
    cloud: LocalCloud, api: LocalApi, module_fake: FakeModel
) -> None:
    """The Lambda dies mid-stream (killed: it records nothing itself): the job fails, and its metrics still
    say what the model wrote and billed (before: metrics.recipe stayed null, and those tokens counted nowhere)."""
    import os
    import signal

    def busy_recipe_workers() -> list[Any]:
        return cloud.pool.busy("RecipeFunction")

    # An earlier test's stopped job may still be in its recipe function (a stop does not end the task): the
    # worker to kill must be this job's, the only one busy.
    wait_until(lambda: not busy_recipe_workers(), timeout_s=60, what="no other job in its recipe function")
    module_fake.chat_script.append(ChatBehaviour(chunk_delay_s=0.05))  # ~30 s of recipe
    job_id = api.post_dish("写到一半就被杀的菜")[1]["jobId"]
    seen = wait_until(
        lambda: (api.get(job_id)[1].get("progress") or {}).get("tokens", 0), timeout_s=15, what="the model is writing"
    )
    [worker] = busy_recipe_workers()
    os.kill(worker.pid, signal.SIGKILL)
    doc = api.wait(job_id, give_up_s=30)
    assert doc["status"] == "FAILED" and doc["error"]["code"] == "INTERNAL", doc
    recipe = doc["metrics"]["recipe"]
    assert recipe["tokensUsed"] >= seen and recipe["tokensWasted"] == recipe["tokensUsed"], recipe
