"""``chuixiang cost``: counts come from real local jobs, prices from the template's settings."""

from __future__ import annotations

import math

import pytest
from stack_template import Template

from chuixiang_local.commands.cost import (
    DDB_WRITE_UNIT,
    LAMBDA_ARM_GB_SECOND,
    SFN_STANDARD_TRANSITION,
    Assumptions,
    PathCounts,
    PollCost,
    estimate,
    measure,
    render,
    report,
)


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[PathCounts], PollCost]:
    """The jobs of every path, run once for the module's tests (~4 s of CPU each time)."""
    return measure({}, tmp_path_factory.mktemp("cost"))


def test_cost_per_path_follows_the_measured_counts_and_the_template(
    measured: tuple[list[PathCounts], PollCost],
) -> None:
    paths, poll = measured
    by_path = {p.path: p for p in paths}
    assert {p: c.status for p, c in by_path.items()} == {
        "generated": "SUCCEEDED",
        "cached": "SUCCEEDED",
        "failed": "FAILED",
        "parallel": "SUCCEEDED",
    }
    generated, cached = by_path["generated"], by_path["cached"]
    assert generated.calls["states:StartExecution"] == cached.calls["states:StartExecution"] == 1
    assert generated.calls["s3:PutObject"] == 1 and cached.calls["s3:PutObject"] == 0
    assert generated.invocations["RecipeFunction"] == 1 and "RecipeFunction" not in cached.invocations
    assert generated.transitions > cached.transitions > 0
    assert generated.transitions == 10  # docs/capacity.md: "1 execution of 10 state transitions" per job
    assert poll.calls["dynamodb:GetItem"] >= 1
    # In sections: five more model calls, each behind its breaker and adding to its model's health.
    parallel = by_path["parallel"]
    assert parallel.transitions == generated.transitions and parallel.calls["s3:PutObject"] == 1
    assert parallel.calls["dynamodb:UpdateItem"] > generated.calls["dynamodb:UpdateItem"]
    assert sum(parallel.tokens_used) > sum(generated.tokens_used) and parallel.cached_prompt_tokens > 0

    assume = Assumptions()
    base = estimate(paths, poll, Template(), assume)
    for path, items in base.items():
        assert all(v >= 0 for v in items.values()), path
        assert math.isclose(items["total"], sum(v for k, v in items.items() if k != "total"))
        transitions = by_path[path].transitions * SFN_STANDARD_TRANSITION * 1000
        assert items["Step Functions transitions"] == pytest.approx(transitions)
    assert base["generated"]["total"] > base["cached"]["total"]
    # Doubling the recipe function's memory adds exactly its 86 s at 128 MB more, per job.
    bigger = estimate(paths, poll, Template({"RecipeMemorySize": "256"}), assume)
    added = bigger["generated"]["Lambda duration"] - base["generated"]["Lambda duration"]
    assert added == pytest.approx(128 / 1024 * assume.recipe_seconds * LAMBDA_ARM_GB_SECOND * 1000)
    # A shorter progress interval means more writes while the recipe streams.
    chatty = estimate(paths, poll, Template({"ProgressIntervalMs": "1000"}), assume)
    extra_writes = math.floor(assume.recipe_seconds / 1) - math.floor(assume.recipe_seconds / 2)
    per_write = math.ceil(max(generated.item_kb, 1)) * DDB_WRITE_UNIT * 1000
    assert chatty["generated"]["DynamoDB writes"] - base["generated"]["DynamoDB writes"] == pytest.approx(
        extra_writes * per_write
    )


def test_the_report_names_its_prices_date_and_the_model_bill(measured: tuple[list[PathCounts], PollCost]) -> None:
    doc = report({}, Assumptions(), measured)
    text = render(doc)
    assert doc["pricedOn"] in text and "model bill" in text
    assert doc["usdPer1000Jobs"]["generated"]["total"] < doc["modelUsdPer1000GeneratedJobs"] / 10
    # The recipe calls' tokens, priced: a generated job used some and wasted none; the failed one (every
    # model answered 503, which is not billed) used none.
    tokens = doc["modelTokensPer1000Jobs"]
    assert tokens["generated"]["tokensUsed"] > 0 and tokens["generated"]["tokensWasted"] == 0
    assert tokens["generated"]["usdUsed"] > 0 and tokens["failed"]["tokensUsed"] == 0
    assert tokens["cached"]["tokensUsed"] == 0
    assert "wasted" in text
    # Both modes priced: parallel writes a few more tokens and repeats its prompt in each section's call.
    by_mode = doc["modelUsdPerRecipe"]
    assert by_mode["parallel"] > by_mode["whole"] and "parallel" in text
    assert doc["usdPer1000Jobs"]["parallel"]["Lambda duration"] < doc["usdPer1000Jobs"]["generated"]["Lambda duration"]
    # What a job reserves where a key's tokens per minute are counted at admission: both modes stated.
    reserved = doc["tokensReservedAtAdmission"]
    assert reserved["whole"] < reserved["sections"] <= 2.5 * reserved["whole"]
    assert f"whole {reserved['whole']}, in sections {reserved['sections']}" in text
