"""The local engine's hook into moto must fail loudly, never silently fall back to a stub."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from chuixiang.timeouts import STATE_TIMEOUT_MARGIN_S
from chuixiang_local import engine
from chuixiang_local.api_client import LocalApi
from chuixiang_local.engine import EngineError, LocalCloud
from chuixiang_local.fake_model import ChatBehaviour, FakeModel
from chuixiang_local.front_door import FrontDoorPriority, SharedCount

from .waiting import wait_until


def test_other_moto_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import moto

    monkeypatch.setattr(moto, "__version__", "9.9.9")
    with pytest.raises(EngineError, match="verified with"):
        engine._patch_moto()


@pytest.mark.pipeline
def test_state_machine_runs_our_handlers_in_order(cloud: LocalCloud, api: LocalApi) -> None:
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
    warm = cloud.invocations[before + 3:]
    assert [lid for lid, _ in warm] == ["SubmitFunction", "RecipeFunction", "ImageFunction"]
    assert all(inv.init_ms is None for _, inv in warm)


@pytest.mark.pipeline
def test_the_state_machine_is_parsed_at_deployment_not_by_its_executions(
        cloud: LocalCloud, api: LocalApi, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    parsed: list[str] = []
    parse = AmazonStateLanguageParser.parse
    monkeypatch.setattr(AmazonStateLanguageParser, "parse",
                        staticmethod(lambda definition: (parsed.append(definition), parse(definition))[1]))
    doc = api.wait(api.post_dish("解析一次菜")[1]["jobId"], give_up_s=30)
    assert doc["status"] == "SUCCEEDED"
    assert parsed == []  # the execution ran the program parsed when the cloud created its state machine


@pytest.mark.pipeline
def test_ended_badly_reads_only_the_failed_timed_out_and_aborted(cloud: LocalCloud, api: LocalApi,
                                                                 module_fake: FakeModel) -> None:
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
    wait_until(lambda: sfn.describe_execution(executionArn=arn)["status"] != "RUNNING", timeout_s=10,
               what="moto stopped the execution (on its own thread)")
    assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"
    ended_badly = cloud._ended_badly()
    assert arn in ended_badly
    assert cloud.execution_arn(succeeded["jobId"]) not in ended_badly
    # The reconciler's invocation for it is the last work this test causes: it must not land in another's.
    wait_until(lambda: cloud.reconciled(arn), timeout_s=15, what="the reconciler handled the aborted execution")


@pytest.mark.pipeline
def test_unrouted_function_is_an_error_not_a_canned_answer(cloud: LocalCloud) -> None:
    lam = cloud.client("lambda")
    lam.create_function(FunctionName="not-ours", Runtime="python3.12", Handler="app.h",
                        Role=lam.get_function(FunctionName=cloud.functions["SubmitFunction"].name)
                        ["Configuration"]["Role"], Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18})
    with pytest.raises(Exception, match="no local route|500|InternalServerError|Internal"):
        lam.invoke(FunctionName="not-ours", Payload=b"{}")


# --- serve's front door first ---------------------------------------------------------------


def _held_in_thread(gate: FrontDoorPriority) -> tuple[threading.Thread, list[float]]:
    released: list[float] = []
    waiter = threading.Thread(target=lambda: (gate.wait_quiet(), released.append(time.monotonic())))
    waiter.start()
    return waiter, released


class OpenRequests:
    """What the API process's count would say, set by the test."""

    def __init__(self) -> None:
        self.open = 0
        self.reads = 0  #: how often the gate looked: proof that it saw the count and still held

    def __call__(self) -> int:
        self.reads += 1
        return self.open


def test_an_invocation_waits_while_a_request_is_open_at_the_api_then_goes() -> None:
    requests = OpenRequests()
    gate = FrontDoorPriority(requests, max_hold_s=30)
    requests.open = 1
    waiter, released = _held_in_thread(gate)
    # The gate has read the open request several times (on arrival, then its watcher) and still holds.
    wait_until(lambda: requests.reads >= 3, timeout_s=10, what="the gate polled the open count")
    assert waiter.is_alive() and not released
    answered = time.monotonic()
    requests.open = 0
    waiter.join(timeout=10)
    assert released and released[0] >= answered  # as soon as the API is quiet
    assert gate.held[0] < 10 and gate.summary().startswith("front door first: 1 of 1 invocations held")


def test_a_quiet_front_door_holds_nothing() -> None:
    gate = FrontDoorPriority(OpenRequests(), max_hold_s=30)
    waiter, released = _held_in_thread(gate)
    waiter.join(timeout=10)
    assert released and not gate.held and gate.summary() == "front door first: 0 of 1 invocations held"


def test_the_hold_is_bounded_so_the_state_timeout_is_never_what_fires() -> None:
    requests = OpenRequests()
    requests.open = 1  # a request that never ends
    gate = FrontDoorPriority(requests, max_hold_s=0.3)
    waiter, released = _held_in_thread(gate)
    waiter.join(timeout=10)
    assert released and 0.3 <= gate.held[0] < 10
    assert "1 let go by the 0.3 s bound" in gate.summary()
    # The default bound is half the margin by which every Task state outlives its function.
    assert FrontDoorPriority(OpenRequests()).max_hold_s == STATE_TIMEOUT_MARGIN_S / 2


def test_the_api_process_count_is_what_the_gate_reads(tmp_path: Path) -> None:
    count = SharedCount.create(tmp_path / "open")
    written_by_the_api = SharedCount(count.path)  # the other process's mapping of the same file
    reads = [0]

    def read() -> int:
        reads[0] += 1
        return count.value()

    gate = FrontDoorPriority(read, max_hold_s=30)
    written_by_the_api.add(2)
    waiter, released = _held_in_thread(gate)
    written_by_the_api.add(-1)
    seen = reads[0]
    # The gate's watcher has read the count twice since it dropped to 1 and still holds.
    wait_until(lambda: reads[0] >= seen + 2, timeout_s=10, what="the gate polled the shared count")
    assert waiter.is_alive() and count.value() == 1
    written_by_the_api.add(-1)
    waiter.join(timeout=10)
    assert released and count.value() == 0
