"""Five recorded provider envelopes, each carrying a recipe, go end to end through ``chuixiang cook
--model-base-url`` to SUCCEEDED (the reader's and the stage's cases are in ``tests/sockets``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial

import pytest

from chuixiang.upstream.chat import StreamLimits

from ..support.provider_corpus import (
    RECIPE_CARRIERS,
    Replay,
    ReplayServer,
    random_cuts,
    recipe_stream,
    recordings,
)
from ..support.serve import ROOT

CORPUS = recordings()
LIMITS = StreamLimits(first_content_s=5, idle_s=5, max_chunks=10_000)


@pytest.mark.parametrize("name", RECIPE_CARRIERS[:5])
def test_cook_against_a_replayed_provider_succeeds(name: str) -> None:
    with ReplayServer(Replay(recipe_stream(name), partial(random_cuts, seed=name, pieces=40))) as server:
        env = {**os.environ, "MODEL_API_KEY": "sk-replay-0123456789abcdef"}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "chuixiang_local.commands.cli",
                "cook",
                "番茄炒蛋",
                "--json",
                "--model-base-url",
                server.base_url,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=ROOT,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["status"] == "SUCCEEDED" and doc["recipe"]["name"] == "番茄炒蛋" and doc["image"], doc
    assert doc["metrics"]["recipe"]["calls"][0]["outcome"] == "ok"
    assert server.chat_requests and server.chat_requests[0]["stream"] is True
