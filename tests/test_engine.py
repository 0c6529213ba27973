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
def test_unrouted_function_is_an_error_not_a_canned_answer(cloud: LocalCloud) -> None:
    lam = cloud.client("lambda")
    lam.create_function(FunctionName="not-ours", Runtime="python3.12", Handler="app.h",
                        Role=lam.get_function(FunctionName=cloud.functions["SubmitFunction"].name)
                        ["Configuration"]["Role"], Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18})
    with pytest.raises(Exception, match="no local route|500|InternalServerError|Internal"):
        lam.invoke(FunctionName="not-ours", Payload=b"{}")
