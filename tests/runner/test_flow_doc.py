"""``docs/architecture.md``'s state machine table is the ASL's (``make docs`` writes it from
``statemachine/recipe.asl.json``): a state added, renamed or rewired without the document fails here."""

from __future__ import annotations

import re

from stack_template import REPO_ROOT

from chuixiang_local.commands import flow


def test_the_flow_table_is_generated_from_the_asl() -> None:
    page = (REPO_ROOT / "docs" / "architecture.md").read_text()
    match = re.search(r"<!-- flow:begin -->\n(.*?)\n<!-- flow:end -->", page, re.DOTALL)
    assert match, "docs/architecture.md has no <!-- flow:begin --> … <!-- flow:end --> block"
    assert match.group(1) == flow.markdown_table(), "stale: run `make docs`"


def test_every_state_is_in_the_table_once() -> None:
    from stack_template import Template

    _, _, definition = Template().state_machine()
    table = flow.markdown_table()
    for state in definition["States"]:
        assert table.count(f"\n| {state} |") == 1, state
