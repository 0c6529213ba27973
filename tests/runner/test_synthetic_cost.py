"""The synthetic job's price in docs/operations.md, from the cost table ``chuixiang cost`` writes there."""

from __future__ import annotations


def test_what_the_synthetic_job_costs_is_what_the_cost_table_says() -> None:
    """docs/operations.md prices a day of runs from its own cost table (a generated job: AWS and the model, per
    1 000 jobs) at the default schedule; the parameter's description says a run's price."""
    import re

    from stack_template import REPO_ROOT, Template

    from chuixiang_local.alarm_scenarios import schedule_seconds

    doc = (REPO_ROOT / "docs" / "operations.md").read_text()
    aws = float(re.search(r"\| \*\*AWS total\*\* \| \*\*([\d.]+)\*\*", doc)[1])  # type: ignore[index]
    model = float(re.search(r"\| the model \(.*?\) \| ([\d.]+) \|", doc)[1])  # type: ignore[index]
    per_run = (aws + model) / 1000
    parameters = Template().doc["Parameters"]
    runs = 86_400 / schedule_seconds(parameters["SyntheticSchedule"]["Default"])
    said = re.search(r"(\d+) runs a day, about (\d+) USD a day", doc)
    assert said and int(said[1]) == runs and int(said[2]) == round(runs * per_run)
    assert f"about {per_run:.2f} USD a run" in parameters["SyntheticSchedule"]["Description"]
