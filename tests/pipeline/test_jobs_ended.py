"""``JobsEnded`` once per job, whoever ends it (issue: a crashed recipe function was never counted, a stopped
job twice): a local mix of a served job, a crashed recipe function, an operator's stop and a failing model,
read back from the functions' log as the dashboard reads it; and the template's saved Logs Insights queries run
over that log (:mod:`chuixiang_local.logs_insights`) say what happened, with the fields the functions log."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from chuixiang_local import logs_insights
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
        broken = cook("模型坏了的菜")
        assert broken["error"]["code"] == "RECIPE_UPSTREAM_ERROR"  # type: ignore[index]
        wait_until(lambda: not cloud.running_executions(), timeout_s=40, what="every execution ended")

        # The stopped job's recipe function goes on until its stall ends, then ends its stage (and loses the count).
        def recipes() -> int:
            return sum(lid == "RecipeFunction" for lid, _ in cloud.invocations)

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
    # A stop is a stop everywhere: the stopped job's recipe stage, cut when it learned the job had ended, is
    # abandoned, not failed (RecipeFailureRateAlarm reads RecipeFailed); the model's failure is the one failure.
    points = read_points([tmp_path / "log"])
    assert sum(p.value for p in points if p.name == "RecipeFailed") == 1
    assert sum(p.value for p in points if p.name == "RecipeAbandoned") == 1
    modes = Counter((dict(p.dims)["Mode"], dict(p.dims)["Basis"]) for p in points if p.name == "RecipeMode")
    assert modes == {("whole", "configured"): 3}, modes  # RecipeSections=whole: the three stages that reported
    _the_saved_queries_say_what_happened(cloud, tmp_path / "log", str(broken["jobId"]))


def _query(cloud: LocalCloud, logical_id: str, log: Path, job_id: str = "") -> list[dict[str, object]]:
    query = cloud.template.resources[logical_id]["Properties"]["QueryString"].replace("PASTE-THE-JOB-ID", job_id)
    return logs_insights.run(query, logs_insights.records(log))


def _the_saved_queries_say_what_happened(cloud: LocalCloud, log: Path, broken_job: str) -> None:
    model = cloud.template.parameters["RecipeModel"]
    failures = {(r["code"], r["model"]): r["failures"] for r in _query(cloud, "FailuresByCodeQuery", log)}
    # The crash is counted, the stop is the operator's (whether the reconciler counted it or the recipe stage it
    # cut reported first: one CI run had the stage first, and the line named its model), the model's failure is
    # the model's.
    assert failures.keys() == {("INTERNAL", None), ("JOB_STOPPED", None), ("RECIPE_UPSTREAM_ERROR", model)}, failures
    assert set(failures.values()) == {1}
    slowest = _query(cloud, "SlowestJobsQuery", log)
    assert {r["recipeModel"] for r in slowest} == {model}  # not the image model of the job that drew a picture
    assert [r["imageModel"] for r in slowest if r["imageModel"]] == [cloud.template.parameters["ImageModel"]]
    [callers] = _query(cloud, "TopCallersQuery", log)  # one caller (no authorizer: one address), four POSTs
    assert callers["message"] == "job started" and callers["requests"] == 4
    assert len(str(callers["callerHash"])) == 16 and "127.0.0.1" not in log.read_text()
    [modes] = _query(cloud, "RecipeModesQuery", log)  # why each recipe was written as it was
    assert (modes["mode"], modes["modeBasis"], modes["jobs"]) == ("whole", "configured", 3), modes
    assert modes["example"] == "RecipeSections=whole"
    calls = _query(cloud, "UpstreamCallsOfJobQuery", log, broken_job)
    assert calls and {(c["upstream"], c["model"], c["http_status"]) for c in calls} == {
        ("chat.completions", model, 503)
    }
    assert all(c["decision"] and c["duration_ms"] is not None for c in calls)
