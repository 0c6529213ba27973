"""The shared package is layered one way: no module imports from a layer above its own.

::

    entry points     steps, api, job_start, job_view         (what the handlers call)
    generation │ stores                                     (peers: neither imports the other)
    resilience       retry rule, routing, breaker policy    (model health through a protocol)
    upstream         transport and provider protocols
    schemas          schemas
    foundation       clock, deadline, errors, settings, timeouts, …

A module may import from its own unit (the same package, or the foundation's and the entry points'
flat modules among themselves) and from any layer below; never from above, never from a peer.
The map (``LAYERS``) lives in ``chuixiang_local/commands/layout.py``; ``docs/architecture.md``'s module table
is generated from it (``make docs``), and a test below keeps it current.
"""

from __future__ import annotations

import ast
import re

import pytest

from chuixiang_local.commands.layout import PACKAGE, markdown_table, modules, unit_of


def imports_of(module: str) -> set[str]:
    """Every ``chuixiang`` module ``module`` imports, at any depth of its code (lazy imports too)."""
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    package = module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = [*base, *(node.module.split(".") if node.module else [])]
            elif node.module and node.module.split(".")[0] == "chuixiang":
                target = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:  # `from . import job_start` names a module
                candidate = [*target, alias.name]
                is_module = PACKAGE.joinpath(*candidate).with_suffix(".py").exists()
                found.add(".".join(candidate if is_module else target))
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("chuixiang."))
    return {m for m in found if m}


@pytest.mark.parametrize("module", modules())
def test_no_import_runs_upward_or_sideways(module: str) -> None:
    rank, unit = unit_of(module)
    for imported in imports_of(module):
        their_rank, their_unit = unit_of(imported)
        assert their_rank < rank or their_unit == unit, (
            f"chuixiang.{module} ({unit}) imports chuixiang.{imported} ({their_unit}): "
            + ("a peer" if their_rank == rank else "a layer above")
        )


def test_the_walk_sees_every_kind_of_import() -> None:
    """The checker itself: relative, absolute, lazy and module imports are all found."""
    found = imports_of("api")
    assert {"job_start", "job_view", "stores.jobs", "errors"} <= found
    assert "stores.images" in imports_of("api")  # imported inside a function too
    assert unit_of("stores.breaker_store") == (4, "stores")


def test_the_module_table_is_generated_from_the_map() -> None:
    """docs/architecture.md's module table is exactly the map and the modules' own docstrings."""
    page = (PACKAGE.parents[2] / "docs" / "architecture.md").read_text()
    match = re.search(r"<!-- layout:begin -->\n(.*?)\n<!-- layout:end -->", page, re.DOTALL)
    assert match, "docs/architecture.md has no <!-- layout:begin --> … <!-- layout:end --> block"
    assert match.group(1) == markdown_table(), "docs/architecture.md's module table is stale: run `make docs`"
