"""The figures of ``docs/admission.md`` are the fairness bench's, as recorded in ``docs/bench/fairness.json``."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DOC = (ROOT / "docs" / "admission.md").read_text()
RUNS = json.loads((ROOT / "docs" / "bench" / "fairness.json").read_text())["runs"]


def _rows(first_cell: str) -> dict[str, list[str]]:
    """The rows of a Markdown table whose first cell matches ``first_cell``: first cell -> the other cells."""
    rows = {}
    for line in DOC.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and re.fullmatch(first_cell, cells[0]):
            rows[cells[0]] = cells[1:]
    return rows


def test_the_run_table_is_the_benchs() -> None:
    rows = _rows(r"(before|after), (warm|cold)")
    assert set(rows) == set(RUNS)
    for name, cells in rows.items():
        run = RUNS[name]
        fields = ("jobsFinished", "worstClient", "bestClient", "clientsWithNone", "jainIndex", "refused429")
        assert cells == [str(run[f]) for f in fields], name


def test_the_clients_by_jobs_table_is_the_benchs() -> None:
    rows = _rows(r"(before|after): clients")
    header = _rows(r"jobs finished")["jobs finished"]
    for when in ("before", "after"):
        counts = Counter(RUNS[f"{when}, warm"]["perClient"])
        assert rows[f"{when}: clients"] == [str(counts[int(jobs)]) for jobs in header]
        assert sum(int(c) for c in rows[f"{when}: clients"]) == RUNS[f"{when}, warm"]["clients"]


def test_the_cost_in_words_is_the_benchs() -> None:
    def fewer(temperature: str) -> int:
        before, after = RUNS[f"before, {temperature}"], RUNS[f"after, {temperature}"]
        return round(100 * (1 - float(after["jobsFinished"]) / float(before["jobsFinished"])))

    assert f"{fewer('warm')} % fewer warm, {fewer('cold')} % cold" in DOC
    share = RUNS["after, warm"]["refused429"] / RUNS["before, warm"]["refused429"]
    assert "a sixth" in DOC and 1 / 7 < share < 1 / 5


def test_the_readmes_fairness_sentence_is_the_benchs() -> None:
    readme = (ROOT / "README.md").read_text()
    after, before = RUNS["after, warm"], RUNS["before, warm"]
    assert f"each finish {after['worstClient']} or {after['bestClient']} jobs" in readme
    assert f"Jain's index {after['jainIndex']:.2f}" in readme
    assert f"left {before['clientsWithNone']} with none and gave {before['bestClient']} to others" in readme


def test_the_lease_is_stated_as_the_api_sets_it() -> None:
    """The lease (``job_start``: ``StateMachineTimeout`` + 60 s from the admission), on the template's defaults."""
    from stack_template import Template

    lease_s = int(Template().number("StateMachineTimeout")) + 60
    assert f"`StateMachineTimeout` + 60 s after it was taken ({lease_s} s on the defaults)" in " ".join(DOC.split())
    source = (ROOT / "layers" / "shared" / "chuixiang" / "job_start.py").read_text()
    assert "timedelta(seconds=STATE_MACHINE.of(settings) + 60)" in source
