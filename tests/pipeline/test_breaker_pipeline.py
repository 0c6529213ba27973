"""The breaker and fallbacks through the local runner: every invocation is its own process, like a cold Lambda."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stack_template import Template

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, ImageBehaviour

from ..support.scaled import SCALED, WHOLE
from ..support.serve import Serve

PRIMARY, FALLBACK = "model-primary", "model-fallback"


def test_fallback_models_through_the_pipeline(fake: FakeModel, tmp_path: Path) -> None:
    overrides = {
        **SCALED,
        **WHOLE,
        "RecipeModel": PRIMARY,
        "RecipeFallbackModels": FALLBACK,
        "ImageModel": PRIMARY,
        "ImageFallbackModels": FALLBACK,
    }
    fake.chat_by_model[PRIMARY] = ChatBehaviour(status=503)
    fake.image_by_model[PRIMARY] = ImageBehaviour(status=503)
    with (
        open(tmp_path / "log", "w") as log,
        LocalCloud(overrides, model_base_url=fake.base_url, work_dir=tmp_path, log=log) as cloud,
    ):
        doc = LocalApi(cloud).wait(LocalApi(cloud).post_dish("回退测试菜")[1]["jobId"], give_up_s=30)
    assert doc["status"] == "SUCCEEDED", doc
    recipe = doc["metrics"]["recipe"]
    assert recipe["model"] == FALLBACK
    calls = [(c["model"], c["outcome"]) for c in recipe["calls"]]
    # The primary fails (503), is retried, then the fallback writes it. On a busy machine the retry's 503 can come
    # after the scaled hedge delay (500 ms): the fallback starts as a hedge and the primary's call is closed as the
    # race's loser (a fresh-clone CI, two suites at once, saw ``hedge_lost`` for the second call).
    assert calls[0] == (PRIMARY, "http_error") and calls[-1] == (FALLBACK, "ok"), calls
    assert len(calls) == 3 and calls[1] in ((PRIMARY, "http_error"), (PRIMARY, "hedge_lost")), calls
    assert doc["image"] is not None and doc["metrics"]["image"]["model"] == FALLBACK


def one_request_then_refused(doc: dict[str, Any]) -> bool:
    """One 503, then either the breaker refused the retry or too little budget was left to try one
    (a late cold start on a busy machine): in both cases the model saw no second request."""
    outcomes = [c["outcome"] for c in doc["metrics"]["recipe"]["calls"]]
    return outcomes[0] == "http_error" and outcomes[1:] in ([], ["breaker_open"])


@pytest.fixture
def serve(fake: FakeModel) -> Iterator[Serve]:
    server = Serve({**SCALED, **WHOLE}, fake.base_url)
    try:
        yield server
    finally:
        server.stop()


def test_breaker_shared_by_every_invocation(serve: Serve, fake: FakeModel, scaled_template: Template) -> None:
    """20 jobs while the model answers every call with 503: the breaker opens after the threshold, the rest
    make no upstream call; after the recovery window one probe goes through; healthy again, it closes."""
    model = scaled_template.parameters["RecipeModel"]
    threshold = int(scaled_template.number("BreakerFailureThreshold"))
    recovery_s = scaled_template.number("BreakerRecoverySeconds")
    fake.chat_by_model[model] = ChatBehaviour(status=503)

    first: list[dict[str, Any]] = []  # one at a time until the model has failed `threshold` times
    while fake.count("/chat/completions") < threshold:
        assert len(first) < threshold, "the breaker never reached its threshold"
        first.append(serve.cook(f"熔断测试{len(first)}"))
    assert fake.count("/chat/completions") == threshold  # the failure that reached it opened the breaker
    assert one_request_then_refused(first[-1]) or len(first[-1]["metrics"]["recipe"]["calls"]) == 2

    rest: list[dict[str, Any]] = []
    while len(first) + len(rest) < 20:  # the other jobs, 3 at a time (more would measure this 2-core machine)
        ids = [serve.post(f"熔断测试{len(first) + len(rest) + i}") for i in range(min(3, 20 - len(first) - len(rest)))]
        rest += [serve.wait(job_id) for job_id in ids]
    assert len(first + rest) == 20
    probes = [doc for doc in rest if doc["metrics"]["recipe"]["calls"][0]["outcome"] != "breaker_open"]
    for doc in rest:
        assert doc["status"] == "FAILED" and doc["error"]["code"] == "RECIPE_UPSTREAM_ERROR", doc
        assert doc["error"]["retryable"] is True
        recipe = doc["metrics"]["recipe"]
        if doc in probes:  # one request; its failure re-opened the breaker, so no retry went out
            assert one_request_then_refused(doc)
        else:
            # Refused at once: no upstream wait, far inside even the retry window.
            assert [c["outcome"] for c in recipe["calls"]] == ["breaker_open"]
            assert recipe["totalMs"] < scaled_template.number("RecipeRetryWindowMs"), recipe
    # While open, the model saw only probes, at most one per recovery window.
    after_open = [t for _, t, _ in fake.requests[threshold:]]
    assert len(after_open) == len(probes) < len(rest) / 2
    opened = fake.requests[threshold - 1][1]  # the breaker opened when this call's 503 came back
    gaps = [b - a for a, b in zip([opened, *after_open], after_open, strict=False)]
    assert all(gap >= recovery_s - 0.05 for gap in gaps), gaps

    # The model recovers: the next probe succeeds and closes the breaker; later jobs call it as usual.
    del fake.chat_by_model[model]
    time.sleep(recovery_s + 0.2)
    healed = serve.cook("熔断恢复1")
    assert healed["status"] == "SUCCEEDED", healed
    after = serve.cook("熔断恢复2")
    assert after["status"] == "SUCCEEDED" and [c["outcome"] for c in after["metrics"]["recipe"]["calls"]] == ["ok"]
