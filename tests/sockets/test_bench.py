"""``chuixiang bench``: models of the fault server with distinct behaviours, each row checked; the
offline command with the embedded profiles writes its JSON, CSV and chart."""

from __future__ import annotations

import csv
import json
import struct
import subprocess
import sys
import time
from pathlib import Path

from stack_template import Template

from chuixiang_local.commands.bench import default_models, run_bench, summarise
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import LATE_S
from ..support.stages import function_settings

ROOT = Path(__file__).resolve().parents[2]


def test_bench_rows_of_distinct_models(fake: FakeModel, scaled_template: Template) -> None:
    total_ms = scaled_template.number("RecipeTotalTimeoutMs")
    fake.chat_by_model.update(
        {
            "healthy": ChatBehaviour(headers_delay_s=0.3),
            "truncated": ChatBehaviour(kind="length"),
            "slow-drip": ChatBehaviour(chunk_delay_s=0.05),  # ~235 chunks: outlives the total limit
            "reasoning-only": ChatBehaviour(kind="reasoning_only"),
            "think-tags": ChatBehaviour(kind="think"),
        }
    )
    models = list(fake.chat_by_model)
    settings = function_settings(scaled_template, "recipe", fake.base_url)
    calls = run_bench(
        settings,
        models,
        ["番茄炒蛋"],
        runs=2,
        concurrency=5,
        api_key=None,
        function_ms=scaled_template.function_by_dir("recipe").timeout_s * 1000,
    )
    rows = {r["model"]: r for r in summarise(calls, models)}

    assert [(m, rows[m]["runs"], rows[m]["valid"], rows[m]["failures"]) for m in models] == [
        ("healthy", 2, 2, {}),
        ("truncated", 2, 0, {"RECIPE_INVALID": 2}),
        ("slow-drip", 2, 0, {"RECIPE_TIMEOUT": 2}),
        ("reasoning-only", 2, 0, {"RECIPE_EMPTY": 2}),
        ("think-tags", 2, 2, {}),
    ]
    assert rows["truncated"]["finishReasons"] == {"length": 2}
    # Timings are the socket's: the headers came 300 ms late, the drip was cut at the total limit.
    assert 300 <= rows["healthy"]["firstContentMs"]["p50"] < 300 + LATE_S * 1000
    assert total_ms <= rows["slow-drip"]["totalMs"]["p50"] <= total_ms + LATE_S * 1000
    assert rows["reasoning-only"]["firstContentMs"]["p50"] is None  # reasoning is not content
    # The fake sends a 4-character chunk per ms: a writing rate is measured, not assumed.
    assert rows["healthy"]["tokensPerSecond"]["p50"] > 50
    assert fake.count("/chat/completions") == 10  # no retries: none of these is an early 5xx


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data.endswith(b"IEND\xaeB`\x82")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_bench_offline_profiles(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "chuixiang_local.commands.cli",
            "bench",
            "--dishes",
            "番茄炒蛋",
            "--concurrency",
            "6",
            "--json",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 60
    doc = json.loads(proc.stdout)  # stdout is exactly one JSON document
    rows = {r["model"]: r for r in doc["models"]}
    assert list(rows) == default_models()
    for row in rows.values():
        assert set(row) >= {
            "model",
            "runs",
            "valid",
            "failures",
            "firstContentMs",
            "totalMs",
            "tokensPerSecond",
            "finishReasons",
        }
    assert rows["fake-steady"]["valid"] == 1 and rows["fake-thinker"]["valid"] == 1
    assert rows["fake-broken-json"]["failures"] == {"RECIPE_INVALID": 1}
    assert rows["fake-length"]["failures"] == {"RECIPE_EMPTY": 1}
    assert rows["fake-length"]["finishReasons"] == {"length": 1}
    assert rows["fake-peak"]["failures"] == {"RECIPE_TIMEOUT": 1}
    # The late starter's first content comes after 57 s of real time, played fake-time-scale faster.
    scale = doc["fakeTimeScale"]
    assert rows["fake-late-start"]["firstContentMs"]["p50"] >= 57_000 * scale * 0.99
    production = Template()
    assert doc["parameters"]["RecipeTotalTimeoutMs"] == str(round(production.number("RecipeTotalTimeoutMs") * scale))
    assert json.loads((tmp_path / "bench.json").read_text()) == doc
    with open(tmp_path / "calls.csv", encoding="utf-8") as fh:
        lines = list(csv.DictReader(fh))
    assert len(lines) == len(default_models()) and {row["model"] for row in lines} == set(default_models())
    width, height = _png_size(tmp_path / "bench.png")
    assert width >= 800 and height >= 400
    assert "bench" in proc.stderr  # the progress bar
