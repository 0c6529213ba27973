"""``JobsEnded`` once per job, whoever ends it (issue: a crashed recipe function was never counted, a stopped
job twice): a local mix of a served job, a crashed recipe function, an operator's stop and a failing model,
read back from the functions' log as the dashboard reads it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.commands.dashboard import read_points
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import SCALED, WHOLE
from ..support.waiting import wait_until

CRASH = Path(__file__).parents[1] / "lambdas" / "crash"


def test_every_job_is_counted_once_with_the_code_it_ended_with(tmp_path: Path) -> None:
    with (
        FakeModel(pace_s=0.001) as fake,
        open(tmp_path / "log", "w") as log,
        LocalCloud({**SCALED, **WHOLE}, model_base_url=fake.base_url, work_dir=tmp_path, log=log) as cloud,
    ):
        api = LocalApi(cloud)

        def cook(dish: str) -> dict[str, object]:
            return api.wait(api.post_dish(dish)[1]["jobId"], give_up_s=30)

        assert cook("数一次的菜")["status"] == "SUCCEEDED"
        recipe = cloud.functions["RecipeFunction"]
        saved, recipe.code_dir = recipe.code_dir, CRASH
        try:  # the function raises: RecipeCrashed -> MarkFailed writes INTERNAL; no function counts it
            crashed = api.post_dish("崩溃的菜")[1]["jobId"]
            wait_until(lambda: cloud.reconciled(cloud.execution_arn(crashed)), timeout_s=30, what="reconciled")
        finally:
            recipe.code_dir = saved
        fake.chat_script.append(ChatBehaviour(stall_after_chunks=2, stall_s=20, keepalive_every_s=0.1))
        stopped = api.post_dish("被停下数的菜")[1]["jobId"]
        wait_until(lambda: not fake.chat_script, timeout_s=30, what="the stopped job's call reached the model")
        arn = cloud.execution_arn(stopped)
        cloud.client("stepfunctions").stop_execution(executionArn=arn, error="Operator", cause="test")
        wait_until(lambda: cloud.reconciled(arn), timeout_s=30, what="the stop reconciled")
        fake.chat_by_model[cloud.template.parameters["RecipeModel"]] = ChatBehaviour(status=503)
        assert cook("模型坏了的菜")["error"]["code"] == "RECIPE_UPSTREAM_ERROR"  # type: ignore[index]
        wait_until(lambda: not cloud.running_executions(), timeout_s=40, what="every execution ended")
        # The stopped job's recipe function goes on until its stall ends, then ends its stage (and loses the count).
        recipes = lambda: sum(lid == "RecipeFunction" for lid, _ in cloud.invocations)  # noqa: E731
        wait_until(lambda: recipes() >= 4, timeout_s=40, what="every recipe invocation ended")
    ended = Counter(
        (dict(p.dims)["Status"], dict(p.dims)["Code"]) for p in read_points([tmp_path / "log"]) if p.name == "JobsEnded"
    )
    assert ended == {
        ("SUCCEEDED", "OK"): 1,
        ("FAILED", "INTERNAL"): 1,
        ("FAILED", "JOB_STOPPED"): 1,
        ("FAILED", "RECIPE_UPSTREAM_ERROR"): 1,
    }, ended
