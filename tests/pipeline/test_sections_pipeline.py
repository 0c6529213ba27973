"""A job on the template's defaults (``RecipeSections=auto``) through the local cloud: a fresh stack has measured
nothing, so its jobs are written in sections; the API, the state machine, the recipe function writing them side
by side, the picture from the merged recipe; what a client polls meanwhile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import SCALED
from ..support.waiting import wait_until


def covered(sections: list[str]) -> list[int]:
    """The steps the ``steps:<from>-<to>`` sections among ``sections`` cover, in order."""
    ranges = sorted(tuple(int(n) for n in s.removeprefix("steps:").split("-")) for s in sections if s[:6] == "steps:")
    return [n for first, last in ranges for n in range(first, last + 1)]


@pytest.fixture(scope="module")
def module_fake() -> Iterator[FakeModel]:
    """A model whose streams wait between chunks rather than compute: ``auto`` measures how many streams' worth
    of writing the key gives a job in sections, and a job's streams at the shared fake's 1 ms a chunk (thousands
    of events a second through this process and one recipe worker) are bound by CPU: a serial run of the pytest
    lane measured "0.8 streams' worth at once", rightly sending the next jobs ``whole``. At 4 ms a chunk they
    predict parallel 5-7 s against whole 17 s (9 s against 17 s before), each stream at its own speed, as a
    hosted model's are."""
    with FakeModel(pace_s=0.004) as model:
        yield model


@pytest.fixture(scope="module")
def cloud(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    work = tmp_path_factory.mktemp("sections")
    # The defaults (auto, fastest), on the scaled ladder; the first content may take the whole total limit: a test
    # holds the steps' headers back 1 s, and six streams answering at once on a busy machine came past 1.5 s.
    overrides = {**SCALED, "RecipeFirstContentTimeoutMs": SCALED["RecipeTotalTimeoutMs"]}
    with (
        open(work / "functions.log", "w") as log,
        LocalCloud(overrides, model_base_url=module_fake.base_url, work_dir=Path(work), log=log) as c,
    ):
        yield c


def cook(api: LocalApi, dish: str) -> dict[str, Any]:
    status, created = api.post_dish(dish)
    assert status == 202, created
    return api.wait(created["jobId"], give_up_s=30)


def test_a_job_in_sections_succeeds_with_the_whole_recipe_and_its_picture(
    api: LocalApi, module_fake: FakeModel
) -> None:
    doc = cook(api, "番茄炒蛋")
    assert doc["status"] == "SUCCEEDED" and doc["image"], doc
    assert doc["degraded"] is None
    recipe = doc["recipe"]
    assert [s["order"] for s in recipe["steps"]] == [1, 2, 3, 4, 5, 6] and recipe["pairings"] and recipe["nutrition"]
    m = doc["metrics"]["recipe"]
    # On a cold stack the default mode writes in sections ("no recent measurement"); measured, the fake's speed
    # still predicts sections faster (the ranges then as few as are as fast).
    assert m["mode"] == "parallel" and m["modeReason"], m
    names = [s["name"] for s in m["sections"]]
    assert names[0] == "outline" and {"extras", "imagePrompt"} <= set(names) and covered(names) == [1, 2, 3, 4, 5, 6]
    assert {s["outcome"] for s in m["sections"]} == {"ok"}
    assert sorted(c["section"] for c in m["calls"]) == sorted(names)
    assert doc["progress"]["percent"] == 100 and set(doc["progress"]["sections"].values()) == {"done"}
    asked = [s for s in module_fake.sections if s is not None]  # (None: the picture's request)
    assert asked[0] == "outline" and sorted(asked[1:]) == sorted(names[1:])


def test_a_dropped_section_is_served_degraded_and_not_cached(api: LocalApi, module_fake: FakeModel) -> None:
    """The extras answer 503: the job SUCCEEDS without pairings and nutrition, says so, keeps its picture; the
    next cook of the dish is written again (a degraded recipe is not cached)."""
    module_fake.chat_by_section["extras"] = ChatBehaviour(status=503)
    doc = cook(api, "鱼香茄子")
    assert doc["status"] == "SUCCEEDED" and doc["image"], doc
    assert doc["degraded"] == ["extras"]
    assert doc["recipe"]["pairings"] is None and doc["recipe"]["nutrition"] is None
    assert doc["progress"]["sections"]["extras"] == "dropped"
    del module_fake.chat_by_section["extras"]
    again = cook(api, "鱼香茄子")
    assert again["status"] == "SUCCEEDED" and again["degraded"] is None
    # Written again (a cached dish's job has no recipe metrics): by the model, whichever mode the measured
    # health now predicts faster.
    recipe_metrics = (again.get("metrics") or {}).get("recipe") or {}
    assert recipe_metrics.get("calls"), "written again, not served from the cache"


def test_the_outline_is_readable_while_the_steps_are_written(api: LocalApi, module_fake: FakeModel) -> None:
    """The steps wait 1 s before answering: meanwhile a poll shows the name, the ingredients and the step titles,
    and which sections are still writing."""
    module_fake.chat_by_section["steps"] = ChatBehaviour(headers_delay_s=1.0)
    status, created = api.post_dish("葱爆羊肉")
    assert status == 202

    def outline_shown() -> dict[str, Any] | None:
        doc = api.get(created["jobId"])[1]
        partial = doc.get("partial") or {}
        sections = (doc.get("progress") or {}).get("sections") or {}
        started = sections.get("outline") == "done" and covered(list(sections)) == [1, 2, 3, 4, 5, 6]
        return doc if started and partial.get("stepTitles") and not partial.get("steps") else None

    seen = wait_until(outline_shown, timeout_s=10, what="the outline shown before any step", interval_s=0.05)
    assert seen is not None
    assert seen["partial"]["name"] == "葱爆羊肉" and seen["partial"]["ingredients"]["main"]
    assert seen["progress"]["sections"]["outline"] == "done"
    ranges = [s for s in seen["progress"]["sections"] if s.startswith("steps:")]
    assert {seen["progress"]["sections"][s] for s in ranges} <= {"waiting", "writing"}
    assert api.wait(created["jobId"], give_up_s=30)["status"] == "SUCCEEDED"
