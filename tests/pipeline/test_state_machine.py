"""The local engine's hook into moto must fail loudly, never silently fall back to a stub."""

from __future__ import annotations

from typing import Any

import pytest

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.waiting import wait_until


def test_state_machine_runs_our_handlers_in_order(cloud: LocalCloud, api: LocalApi) -> None:
    """Each task once. Seen once in a fresh clone: ``[Submit, Recipe, Recipe, Image]`` for the second job. Not a
    retry: the ASL retries Recipe only on Lambda's service errors (a throttle among them), and a throttled call
    is never recorded as an invocation, nor does any recorded one carry those errors. It was another test's
    job: a stopped execution's recipe function goes on until its stall ends (a stop does not end a task) and
    ended inside this test's window. So this test starts with no function running, and a repeat names its
    error."""
    wait_until(lambda: not cloud.pool.busy(), timeout_s=60, what="no other test's invocation still running")
    before = len(cloud.invocations)
    doc = api.wait(api.post_dish("引擎自检菜")[1]["jobId"], give_up_s=30)
    assert doc["status"] == "SUCCEEDED"
    ran = [(lid, inv.error_type) for lid, inv in cloud.invocations[before:]]
    assert ran == [("SubmitFunction", None), ("RecipeFunction", None), ("ImageFunction", None)]
    # Each ran in a worker process of its function (moto's canned answer has no init and takes ~0 ms):
    # its first invocation had a cold start, whose init is reported apart from the duration.
    for lid in ("SubmitFunction", "RecipeFunction", "ImageFunction"):
        first = next(inv for name, inv in cloud.invocations if name == lid)
        assert first.init_ms is not None and first.init_ms > 0, lid
    # A second job finds the workers warm: no init at all.
    again = api.wait(api.post_dish("引擎自检菜二")[1]["jobId"], give_up_s=30)
    assert again["status"] == "SUCCEEDED"
    warm = cloud.invocations[before + 3 :]
    assert [lid for lid, _ in warm] == ["SubmitFunction", "RecipeFunction", "ImageFunction"], [
        (lid, inv.error_type) for lid, inv in warm
    ]
    assert all(inv.init_ms is None for _, inv in warm)


def test_the_state_machine_is_parsed_at_deployment_not_by_its_executions(
    cloud: LocalCloud, api: LocalApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser

    parsed: list[object] = []  # ANTLR's parses themselves, whoever asks for them
    parse = ASLParser.state_machine

    def counted(self: ASLParser) -> Any:
        parsed.append(self)
        return parse(self)  # type: ignore[no-untyped-call]  # ANTLR-generated, untyped

    monkeypatch.setattr(ASLParser, "state_machine", counted)
    doc = api.wait(api.post_dish("解析一次菜")[1]["jobId"], give_up_s=30)
    assert doc["status"] == "SUCCEEDED"
    assert parsed == []  # the execution ran the program parsed when the cloud created its state machine


def test_ended_badly_reads_only_the_failed_timed_out_and_aborted(
    cloud: LocalCloud, api: LocalApi, module_fake: FakeModel
) -> None:
    succeeded = api.wait(api.post_dish("善终菜")[1]["jobId"], give_up_s=30)
    assert succeeded["status"] == "SUCCEEDED"
    # Stopped while provably running: its recipe call is held at the model, so it cannot end on its own first.
    module_fake.chat_script.append(ChatBehaviour(headers_delay_s=30))
    job_id = api.post_dish("半路停下的菜")[1]["jobId"]
    wait_until(lambda: module_fake.count("/chat/completions"), timeout_s=15, what="the recipe call reached the model")
    arn = cloud.execution_arn(job_id)
    sfn = cloud.client("stepfunctions")
    assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    sfn.stop_execution(executionArn=arn)
    wait_until(
        lambda: sfn.describe_execution(executionArn=arn)["status"] != "RUNNING",
        timeout_s=10,
        what="moto stopped the execution (on its own thread)",
    )
    assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    ended_badly = cloud.executions.ended_badly()
    assert arn in ended_badly
    assert cloud.execution_arn(succeeded["jobId"]) not in ended_badly
    # The reconciler's invocation for it is the last work this test causes: it must not land in another's.
    wait_until(lambda: cloud.reconciled(arn), timeout_s=15, what="the reconciler handled the aborted execution")


def test_unrouted_function_is_an_error_not_a_canned_answer(cloud: LocalCloud) -> None:
    lam = cloud.client("lambda")
    lam.create_function(
        FunctionName="not-ours",
        Runtime="python3.12",
        Handler="app.h",
        Role=lam.get_function(FunctionName=cloud.functions["SubmitFunction"].name)["Configuration"]["Role"],
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
    )
    with pytest.raises(Exception, match=r"no local route|500|InternalServerError|Internal"):
        lam.invoke(FunctionName="not-ours", Payload=b"{}")


# --- serve's front door first ---------------------------------------------------------------
