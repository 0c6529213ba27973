"""``chuixiang cost``'s RecipeSections=parallel assumptions are what ``chuixiang bench --sections`` measured
(docs/bench/sections.json, the peak), so the bill it prints for each mode follows the bench."""

from __future__ import annotations

import json

import pytest

from chuixiang_local.commands.cost import SECTIONS_BENCH, Assumptions


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
