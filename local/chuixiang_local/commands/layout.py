"""The shared layer's map: which layer each module of ``chuixiang`` is in, and the module table built from it.

``tests/runner/test_layers.py`` enforces the map (no import runs upward or sideways); ``docs/architecture.md``'s
module table is generated from the same map and from each module's own docstring (its first sentence), so
the document can list neither a module that is gone nor one the map does not place.
"""

from __future__ import annotations

import ast
import re

from stack_template import REPO_ROOT

PACKAGE = REPO_ROOT / "layers" / "shared" / "chuixiang"

#: Bottom to top; a layer's units (packages, or groups of flat modules) at the same rank are peers.
LAYERS: list[dict[str, set[str]]] = [
    {
        "foundation": {
            "clock",
            "key_forms",
            "redaction",
            "timeouts",
            "limit_rules",
            "slo",
            "observability",
            "job_status",
            "dish",
            "deadline",
            "errors",
            "settings",
            "polling",
            "tracing",
        }
    },
    {"schemas": {"schemas"}},
    {"upstream": {"upstream"}},
    {"resilience": {"resilience"}},
    {"generation": {"generation"}, "stores": {"stores"}},
    {
        "entry": {
            "steps",
            "stage_report",
            "route_wiring",
            "api",
            "api_gate",
            "job_start",
            "job_view",
            "synthetic",
            "canary",
        }
    },
]


def modules() -> list[str]:
    """Every module of the package, dotted below ``chuixiang`` (``upstream.chat``)."""
    return sorted(
        ".".join(p.relative_to(PACKAGE).with_suffix("").parts) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"
    )


def unit_of(module: str) -> tuple[int, str]:
    """``module``'s layer (its rank, bottom 0) and its unit."""
    head = module.split(".")[0]
    for rank, units in enumerate(LAYERS):
        for unit, heads in units.items():
            if head in heads:
                return rank, unit
    raise LookupError(f"chuixiang.{module} is in no layer: add it to LAYERS (chuixiang_local/commands/layout.py)")


def summary(module: str) -> str:
    """The first sentence of ``module``'s docstring, as Markdown on one line."""
    path = PACKAGE.joinpath(*module.split(".")).with_suffix(".py")
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    sentence = re.split(r"(?<=[.!?])\s", paragraph, maxsplit=1)[0]
    sentence = re.sub(r":\w+:`~?\.*([^`]+)`", r"`\1`", sentence)  # :class:`Router` -> `Router`
    return sentence.replace("``", "`").replace("|", "\\|")


def markdown_table() -> str:
    """The module table, top layer first: layer, module path, what it is for."""
    rows = ["| layer | module | what it is for |", "|---|---|---|"]
    placed = sorted(modules(), key=lambda m: (-unit_of(m)[0], unit_of(m)[1], m))
    for module in placed:
        path = "/".join(module.split(".")) + ".py"
        rows.append(f"| {unit_of(module)[1]} | `{path}` | {summary(module)} |")
    return "\n".join(rows)
