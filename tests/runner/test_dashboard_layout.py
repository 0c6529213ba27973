"""The dashboard's Lambda row: every function of the stack (the canary's only exists with CanaryModels), and
each Timeout line drawn from the template's own value, not a number repeated."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from stack_template import Template

ALWAYS = {"ApiFunction", "SubmitFunction", "RecipeFunction", "ImageFunction", "ReconcileFunction"}


def _widgets(template: Template) -> dict[str, dict[str, Any]]:
    doc = json.loads(template.resolve(template.doc["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))
    return {w["properties"].get("title", ""): w["properties"] for w in doc["widgets"] if w["type"] == "metric"}


def _functions_in(widget: dict[str, Any], template: Template) -> set[str]:
    names = {template.physical[lid]["Ref"]: lid for lid in template.of_type("AWS::Serverless::Function")}
    return {names[row[3]] for row in widget["metrics"] if isinstance(row[0], str) and row[3] in names}


def test_the_lambda_row_shows_every_function() -> None:
    template = Template()
    widgets = _widgets(template)
    for title in (
        "Errors and throttles by function",
        "Concurrent executions by function (max)",
        "p99 duration (s) against the Timeout",
    ):
        assert _functions_in(widgets[title], template) == ALWAYS, title
    metrics = {row[1] for row in widgets["Errors and throttles by function"]["metrics"] if row[1] != "."}
    assert metrics == {"Errors", "Throttles"}


def test_each_timeout_line_is_the_functions_timeout() -> None:
    template = Template({"RecipeFunctionTimeout": "170", "ImageFunctionTimeout": "90"})
    lines = _widgets(template)["p99 duration (s) against the Timeout"]["annotations"]["horizontal"]
    functions = template.of_type("AWS::Serverless::Function")
    for line in lines:
        name = re.match(r"(\w+Function) Timeout", line["label"])
        assert name, line
        assert line["value"] == int(template.resolve(functions[name[1]]["Properties"]["Timeout"])), line
    assert {line["value"] for line in lines} == {170, 90}


def test_drawing_without_matplotlib_says_how_to_install_it_instead_of_crashing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a venv without matplotlib (``make run`` installs it; a venv made otherwise may not), ``chuixiang
    dashboard --out`` crashed with ModuleNotFoundError: it is a configuration error (exit 2) that names the install
    command."""
    from chuixiang_local.commands import cli
    from chuixiang_local.commands.charts import INSTALL

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed: `import matplotlib` fails
    code = cli.main(["dashboard", "--logs", str(tmp_path), "--out", str(tmp_path / "d.png")])
    assert code == 2
    assert INSTALL in capsys.readouterr().err and not (tmp_path / "d.png").exists()


def test_make_run_installs_what_the_dashboard_draws_with() -> None:
    """A fresh clone's ``make run`` then ``chuixiang dashboard --out d.png`` draws: ``make run`` installs the
    project's runtime dependencies (``uv pip install -e .``), and matplotlib is one of them."""
    import tomllib

    from stack_template import REPO_ROOT

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.split("==")[0] == "matplotlib" for d in project["dependencies"])
    rule = (REPO_ROOT / "Makefile").read_text().split("\n$(RUN_STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "$(UV_INSTALL) $(BIN)/python --compile-bytecode -e .\n" in rule, rule
