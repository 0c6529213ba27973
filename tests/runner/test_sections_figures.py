"""Every figure about ``RecipeSections`` is what ``chuixiang bench --sections`` measured (docs/bench/sections.json):
the tables of docs/sections.md, docs/capacity.md and docs/ladder.md, and ``chuixiang cost``'s assumptions."""

from __future__ import annotations

import json
import re

import pytest
from stack_template import REPO_ROOT

from chuixiang_local.commands.cost import SECTIONS_BENCH, Assumptions
from chuixiang_local.commands.readme import sections_blocks


@pytest.mark.parametrize(("page", "block", "content"), sections_blocks(), ids=lambda v: str(v)[:20])
def test_the_docs_show_the_benchs_figures(page: str, block: str, content: str) -> None:
    text = (REPO_ROOT / "docs" / page).read_text()
    found = re.search(rf"<!-- {block}:begin -->\n(.*?)\n<!-- {block}:end -->", text, re.DOTALL)
    assert found, f"docs/{page} has no {block} block"
    assert found.group(1) == content, f"docs/{page}'s {block} block is stale: run `make docs`"


def test_the_parallel_assumptions_are_the_benchs_peak_in_proportion_to_whole() -> None:
    rows = {r["mode"]: r for r in json.loads(SECTIONS_BENCH.read_text())["rows"] if r["scenario"] == "peak"}
    whole, parallel, a = rows["whole"], rows["parallel"], Assumptions()
    seconds = a.recipe_seconds * parallel["totalMs"]["p50"] / whole["totalMs"]["p50"]
    assert a.parallel_recipe_seconds == pytest.approx(seconds, abs=1)
    prompt = a.recipe_prompt_tokens * parallel["promptTokens"] / whole["promptTokens"]
    assert a.parallel_prompt_tokens == pytest.approx(prompt, rel=0.01)
    written = a.recipe_completion_tokens * parallel["completionTokens"] / whole["completionTokens"]
    assert a.parallel_completion_tokens == pytest.approx(written, rel=0.01)
    assert (a.whole_cached_share, a.parallel_cached_share) == (
        whole["cachedPromptShare"],
        parallel["cachedPromptShare"],
    )


def test_each_modes_bill_prices_its_tokens() -> None:
    a = Assumptions()
    bill = a.recipe_usd_by_mode()
    assert bill["whole"] == pytest.approx((300 * 2.0 + 1600 * 10.0) / 1e6)
    fresh = a.parallel_prompt_tokens * (1 - a.parallel_cached_share)
    cached = a.parallel_prompt_tokens * a.parallel_cached_share
    expected = (fresh * 2.0 + cached * 0.5 + a.parallel_completion_tokens * 10.0) / 1e6
    assert bill["parallel, prefix cached"] == pytest.approx(expected)
    assert bill["parallel"] > bill["parallel, prefix cached"] > bill["whole, prefix cached"]


def test_auto_is_priced_as_the_bench_measured_it_choosing() -> None:
    """At the peak ``auto`` wrote every job in sections: parallel's bill; on a capped key it went whole after
    its first job: within 10 % of whole's."""
    bill = Assumptions().recipe_usd_by_mode()
    peak = next(v for k, v in bill.items() if k.startswith("auto, peak"))
    capped = next(v for k, v in bill.items() if k.startswith("auto, capped key"))
    assert peak == pytest.approx(bill["parallel"], rel=0.01)
    assert bill["whole"] <= capped <= 1.1 * bill["whole"]
