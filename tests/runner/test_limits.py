"""Each ladder limit is declared once (``chuixiang.timeouts``); everything else must agree with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from stack_template import Template

from chuixiang.limit_rules import Limit
from chuixiang.settings import Settings
from chuixiang.timeouts import LIMITS
from chuixiang_local.commands.ladder import markdown_table

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template() -> Template:
    return Template()


@pytest.mark.parametrize("limit", LIMITS, ids=lambda limit: limit.parameter)
def test_template_parameter_matches_declaration(template: Template, limit: Limit) -> None:
    spec = template.doc["Parameters"][limit.parameter]
    assert spec["Type"] == "Number"
    assert int(spec["Default"]) == limit.default
    if "MinValue" in spec:
        assert int(spec["MinValue"]) == limit.minimum


@pytest.mark.parametrize("limit", [lim for lim in LIMITS if lim.env], ids=lambda limit: limit.parameter)
def test_functions_receive_the_declared_variable(template: Template, limit: Limit) -> None:
    """The declared functions get ``env = !Ref Parameter``; no function gets the parameter under another name."""
    glob = template.doc["Globals"]["Function"]["Environment"]["Variables"]
    for lid, res in template.of_type("AWS::Serverless::Function").items():
        own = res["Properties"].get("Environment", {}).get("Variables", {})
        env = {**glob, **own}
        for name, value in env.items():
            if value == {"Ref": limit.parameter}:
                assert name == limit.env, f"{lid} gets {limit.parameter} as {name}, declared {limit.env}"
        code_dir = Path(res["Properties"]["CodeUri"]).name
        if "*" in limit.functions:
            assert glob.get(limit.env) == {"Ref": limit.parameter}
        elif code_dir in limit.functions:
            assert own.get(limit.env) == {"Ref": limit.parameter}, f"{lid} lacks {limit.env}"


@pytest.mark.parametrize("limit", [lim for lim in LIMITS if lim.env], ids=lambda limit: limit.parameter)
def test_settings_read_the_declared_variable(limit: Limit, monkeypatch: pytest.MonkeyPatch) -> None:
    assert limit.env
    monkeypatch.delenv(limit.env, raising=False)
    assert limit.of(Settings.model_validate({})) == limit.default
    assert limit.of(Settings.model_validate({limit.env: str(limit.default + 1)})) == limit.default + 1


def test_every_limit_inside_another_names_a_declared_limit() -> None:
    names = {limit.parameter for limit in LIMITS}
    assert all(outer in names for limit in LIMITS for outer in limit.inside)
    assert all(limit.scaled is None or limit.scaled < limit.default for limit in LIMITS)


def test_the_ladder_table_is_generated() -> None:
    """docs/ladder.md's table is exactly what `chuixiang ladder --markdown` prints for the shipped template."""
    page = (ROOT / "docs" / "ladder.md").read_text()
    match = re.search(r"<!-- ladder:begin -->\n(.*?)\n<!-- ladder:end -->", page, re.DOTALL)
    assert match, "docs/ladder.md has no <!-- ladder:begin --> … <!-- ladder:end --> block"
    assert match.group(1) == markdown_table(Template()), "docs/ladder.md's table is stale: run `make docs-ladder`"
