"""Five recorded provider envelopes, each carrying a recipe, go end to end to SUCCEEDED: the first through
``chuixiang cook --model-base-url``, the others through one local cloud's API (the reader's and the stage's
cases are in ``tests/sockets``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from chuixiang.upstream.chat_reader import StreamLimits
from chuixiang_local.cloud.local_cloud import LocalCloud, environment_before_activation
from chuixiang_local.gateway.api_client import LocalApi

from ..support.commands import run_cli
from ..support.provider_corpus import (
    RECIPE_CARRIERS,
    Replay,
    ReplayServer,
    random_cuts,
    recipe_stream,
    recordings,
)
from ..support.scaled import WHOLE

CORPUS = recordings()
LIMITS = StreamLimits(first_content_s=5, idle_s=5, max_chunks=10_000)


KEY = "sk-replay-0123456789abcdef"


def test_cook_against_a_replayed_provider_succeeds() -> None:
    """The first recording through the whole command a user runs, ``chuixiang cook --model-base-url``."""
    name = RECIPE_CARRIERS[0]
    with ReplayServer(Replay(recipe_stream(name), partial(random_cuts, seed=name, pieces=40))) as server:
        done = run_cli(
            "cook",
            "番茄炒蛋",
            "--json",
            "--model-base-url",
            server.base_url,
            "--parameter-overrides",
            "RecipeSections=whole",  # the recording is of a whole answer
            env={**environment_before_activation(), "MODEL_API_KEY": KEY},
        )
    assert done.returncode == 0, done.stderr[-3000:]
    succeeded(json.loads(done.stdout), server)


@pytest.fixture(scope="module")
def replaying(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ReplayServer, LocalApi]]:
    """One replay server and one local cloud (the production ladder) for the other recordings, in turn."""
    work = tmp_path_factory.mktemp("replay")
    with (
        ReplayServer(Replay(b"")) as server,
        open(work / "log", "w") as log,
        LocalCloud(WHOLE, model_base_url=server.base_url, work_dir=work, log=log, model_api_key=KEY) as cloud,
    ):
        yield server, LocalApi(cloud)


@pytest.mark.parametrize("name", RECIPE_CARRIERS[1:5])
def test_a_job_against_each_replayed_provider_succeeds(name: str, replaying: tuple[ReplayServer, LocalApi]) -> None:
    """The next four recordings through the API and the state machine of one local cloud."""
    server, api = replaying
    server.replay = Replay(recipe_stream(name), partial(random_cuts, seed=name, pieces=40))
    server.chat_requests.clear()
    status, created = api.post_dish(f"番茄炒蛋{RECIPE_CARRIERS.index(name)}")
    assert status == 202, created
    succeeded(api.wait(created["jobId"], give_up_s=60), server)


def succeeded(doc: dict[str, Any], server: ReplayServer) -> None:
    assert doc["status"] == "SUCCEEDED" and doc["recipe"]["name"] == "番茄炒蛋" and doc["image"], doc
    assert doc["metrics"]["recipe"]["calls"][0]["outcome"] == "ok"
    assert server.chat_requests and server.chat_requests[0]["stream"] is True
