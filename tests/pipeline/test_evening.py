"""``bench/evening.py``: the simulated evening's tables in docs/capacity.md are what it prints now, and what the
page says of them holds (in-process, ~5 s: it runs every scenario)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from stack_template import REPO_ROOT, Template

from chuixiang_local.commands.cost import Assumptions
from chuixiang_local.evening.profile import measured_jobs
from chuixiang_local.evening.quotas import AWS_REGIONS, PROVIDERS
from chuixiang_local.evening.report import SCENARIOS, markdown, run
from chuixiang_local.evening.sim import Evening, Stack

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

Rows = dict[Any, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def evenings() -> Rows:
    """Every scenario's evening, run once (~14 s of CPU): in a fixture, not at import, so only the worker that runs
    these tests pays for it (each pytest-xdist worker imports every test module to collect it)."""
    return {s: run(s) for s in SCENARIOS}


def test_the_capacity_page_shows_the_evenings_as_simulated_now(evenings: Rows) -> None:
    text = (REPO_ROOT / "docs" / "capacity.md").read_text()
    found = re.search(r"<!-- evening:begin -->\n(.*?)\n<!-- evening:end -->", text, re.DOTALL)
    assert found, "docs/capacity.md has no evening block"
    assert found.group(1) == "\n\n".join(markdown(s, rows) for s, rows in evenings.items()), "run `make docs`"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.title)
def test_auto_is_never_the_worse_choice_and_aws_never_binds(scenario: Any, evenings: Rows) -> None:
    rows = {r["mode"]: r for r in evenings[scenario]}
    auto, whole = rows["auto"], rows["whole"]
    assert auto["outcomes"].get("served", 0) >= 0.99 * whole["outcomes"].get("served", 0)
    assert auto["waitS"]["p95"] <= 1.05 * whole["waitS"]["p95"]
    assert auto["waitS"]["p50"] <= whole["waitS"]["p50"]
    for r in rows.values():
        assert sum(r["outcomes"].values()) == scenario.users  # every user ends somewhere
        assert r["startExecution503"] == r["lambdaThrottles"] == 0
        assert r["peak"]["transitionsPerS"] <= 100
        template = Template(dict(scenario.overrides))
        if key_streams := int(template.number("RecipeKeyStreams")):  # stated: no loan ever takes the key past it
            assert r["peak"]["streams"] <= key_streams + 1e-6


def test_an_evening_is_the_same_every_run_and_its_line_is_first_come_first_served() -> None:
    jobs, template = measured_jobs(), Template({"RecipeConcurrency": "22"})
    provider, aws = PROVIDERS["qwen-plus"], AWS_REGIONS["us-east-1"]

    def evening() -> Evening:
        return Evening(400, Stack.of(template, "auto"), provider, aws, jobs, seed=7).run()

    first, second = evening(), evening()
    assert first.summary(Assumptions()) == second.summary(Assumptions())
    served = [u for u in first.users if u.outcome == "served"]
    assert served and all(u.recipe_at is not None and u.recipe_at > u.first_post for u in served)
    # Admission counts jobs; a key that never refused lends every job its sections' streams.
    summary = first.summary(Assumptions())
    assert not any(summary["providerRefused"].values()) and {u.borrowed for u in served} == {True}
    assert summary["sectionsJobs"] == len(served)


def test_the_bench_readme_quotes_the_evenings_as_simulated_now(evenings: Rows) -> None:
    text = " ".join((REPO_ROOT / "bench" / "README.md").read_text().split())
    quiet, busy, raised, capped, _, _ = ({r["mode"]: r for r in evenings[s]} for s in SCENARIOS)

    def served(r: dict[str, Any]) -> str:
        return f"{r['outcomes']['served']:,}"

    auto, whole = quiet["auto"]["waitS"], quiet["whole"]["waitS"]
    assert f"`auto` {auto['p50']:.0f} s p50 / {auto['p95']:.0f} s p95" in text
    assert f"`whole`'s {whole['p50']:.0f} / {whole['p95']:.0f} s" in text
    assert f"`auto` serves {served(busy['auto'])} to `whole`'s {served(busy['whole'])}" in text
    assert f"{served(raised['auto'])} in {raised['auto']['waitS']['p95']:.0f} s p95" in text
    assert f"{served(capped['auto'])} to `whole`'s {served(capped['whole'])} where `parallel` serves" in text
    assert f"serves {served(capped['parallel'])}." in text


def test_what_the_capacity_page_says_of_the_evenings_holds(evenings: Rows) -> None:
    text = " ".join((REPO_ROOT / "docs" / "capacity.md").read_text().split())
    quiet, busy, raised, capped, moonshot1, moonshot0 = ({r["mode"]: r for r in evenings[s]} for s in SCENARIOS)
    assert quiet["auto"]["waitS"]["p50"] / quiet["whole"]["waitS"]["p50"] < 1 / 3  # "under a third"
    assert quiet["auto"]["waitS"]["p95"] / quiet["whole"]["waitS"]["p95"] < 1 / 3
    assert busy["auto"]["outcomes"]["served"] == 10_000  # "serve every user in sections"
    assert busy["auto"]["sectionsJobs"] == 10_000
    assert 0.65 <= busy["whole"]["outcomes"]["served"] / 10_000 <= 0.75  # "about 70 %"
    assert f"in sections, {raised['auto']['waitS']['p95']:.0f} s at p95" in text
    failed = {m: sum(n for o, n in r["outcomes"].items() if o.startswith("failed")) for m, r in capped.items()}
    assert len(set(failed.values())) == 1 and 0.15 <= failed["whole"] / 10_000 <= 0.25  # "about a fifth … alike"
    for evening in (moonshot1, moonshot0):  # "every job written whole and none refused by the provider"
        for r in evening.values():
            assert r["sectionsJobs"] == 0 and not any(r["providerRefused"].values())
    assert 0.25 <= moonshot0["auto"]["outcomes"]["gave up"] / 100 <= 0.4  # "about a third give up in line"
    assert all(r["peak"]["wcuPerS"] < 400 for s in SCENARIOS for r in evenings[s])
