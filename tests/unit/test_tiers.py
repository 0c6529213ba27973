"""The product's unit tier tests the product without the runner (``docs/local-runner.md``, "The border"): no
file of ``tests/unit`` imports ``chuixiang_local``, directly or through the tests' support modules."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imports(path: Path, tests: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # ..support.x from tests/unit: the support module's own imports count too
                target = tests.joinpath(*module.split(".")).with_suffix(".py") if node.level == 2 else None
                if target is not None and target.exists():
                    found.update(_imports(target, tests))
                continue
            found.add(module)
    return found


def runner_imports(files: list[Path], tests: Path = TESTS) -> list[str]:
    return [f"{f.name}: {m}" for f in files for m in sorted(_imports(f, tests)) if m.split(".")[0] == "chuixiang_local"]


def test_the_unit_tier_imports_nothing_of_the_runner() -> None:
    assert runner_imports(sorted((TESTS / "unit").glob("*.py"))) == []


def test_the_rule_sees_an_import_through_a_support_module(tmp_path: Path) -> None:
    (tmp_path / "support").mkdir()
    (tmp_path / "unit").mkdir()
    (tmp_path / "support" / "helper.py").write_text("from chuixiang_local.model.fake_model import FakeModel\n")
    test = tmp_path / "unit" / "test_x.py"
    test.write_text("from ..support.helper import FakeModel\nimport chuixiang.steps\n")
    assert runner_imports([test], tmp_path) == ["test_x.py: chuixiang_local.model.fake_model"]
