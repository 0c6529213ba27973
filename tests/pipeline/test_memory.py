"""Each function's peak memory stays under its ``MemorySize`` with the largest inputs it accepts.

One job through the local cloud with the largest recipe the recipe stage keeps and an 8 MiB
image (the image stage's limit), then the api function polled for that job through its worker.
Every function process reports its peak RSS after each invocation (Lambda's "Max Memory Used":
the whole process, runtime and imports included); each must leave ``HEADROOM`` of its setting.
"""

from __future__ import annotations

import json
from pathlib import Path

from chuixiang.generation.recipe_format import RECIPE_MAX_BYTES
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi, http_event
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, ImageBehaviour

from ..support.scaled import SCALED, WHOLE

#: The share of MemorySize a function may use at its peak (the rest is headroom).
HEADROOM = 0.85
IMAGE_MAX = 8 * 1024 * 1024


def test_peak_memory_of_every_function_under_its_setting(fake: FakeModel, tmp_path: Path) -> None:
    fake.chat_script.append(ChatBehaviour(kind="largest", chunk_chars=64))
    fake.image_script.append(ImageBehaviour(size_bytes=IMAGE_MAX))
    overrides = {
        **SCALED,
        **WHOLE,  # the largest recipe one answer may write
        "RecipeTotalTimeoutMs": "6000",
        "RecipeFunctionTimeout": "8",
        "CanaryFunctionTimeout": "9",
        "StateMachineTimeout": "30",
    }
    with (
        open(tmp_path / "log", "w") as log,
        LocalCloud(overrides, model_base_url=fake.base_url, work_dir=tmp_path, log=log) as cloud,
    ):
        api = LocalApi(cloud)
        doc = api.wait(api.post_dish("最大菜谱")[1]["jobId"], give_up_s=30)
        assert doc["status"] == "SUCCEEDED", doc
        assert RECIPE_MAX_BYTES * 0.95 < len(json.dumps(doc["recipe"], ensure_ascii=False).encode()) <= RECIPE_MAX_BYTES
        assert doc["image"] is not None and Path(doc["image"]["url"]).stat().st_size == IMAGE_MAX
        spec = cloud.template.function_by_dir("api")
        polled = cloud.invoke(spec, http_event("GET", f"/recipes/{doc['jobId']}"))
        assert polled.payload["statusCode"] == 200
        peaks: dict[str, int] = {}
        for logical_id, invocation in cloud.invocations:
            assert invocation.max_memory_mb is not None, logical_id
            peaks[logical_id] = max(peaks.get(logical_id, 0), invocation.max_memory_mb)
        settings = {s.logical_id: s.memory_mb for s in cloud.functions.values()}
    assert {"SubmitFunction", "RecipeFunction", "ImageFunction", "ApiFunction"} <= set(peaks)
    for logical_id, peak in peaks.items():
        assert peak <= settings[logical_id] * HEADROOM, f"{logical_id}: {peak} of {settings[logical_id]} MB"
