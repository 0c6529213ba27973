"""The local engine's hook into moto must fail loudly, never silently fall back to a stub."""

from __future__ import annotations

import pytest

from chuixiang_local import engine
from chuixiang_local.api_client import LocalApi
from chuixiang_local.engine import EngineError, LocalCloud


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
    # Each one was a real process with its own cold start, not moto's canned "happy path" answer.
    assert all(inv.duration_ms > 100 for _, inv in cloud.invocations[before:])


@pytest.mark.pipeline
def test_unrouted_function_is_an_error_not_a_canned_answer(cloud: LocalCloud) -> None:
    lam = cloud.client("lambda")
    lam.create_function(FunctionName="not-ours", Runtime="python3.12", Handler="app.h",
                        Role=lam.get_function(FunctionName=cloud.functions["SubmitFunction"].name)
                        ["Configuration"]["Role"], Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18})
    with pytest.raises(Exception, match="no local route|500|InternalServerError|Internal"):
        lam.invoke(FunctionName="not-ours", Payload=b"{}")
