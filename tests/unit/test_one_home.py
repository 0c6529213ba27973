"""One home per name: every name of the shared package is imported from the module that defines it, and no
module imports another's private name (``_name``: a module's own business; one used elsewhere is public).

Only a package's ``__init__.py`` may re-export (its public face, as httpx's packages do); a plain module that
imports a name and passes it on makes two addresses for one thing, and the importers drift between them. The
rule is checked over every importer: the package itself, the handlers, the runner, the tests and the benches.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_ROOT = ROOT / "layers" / "shared"
IMPORTERS = ("layers", "functions", "local", "tests", "bench")


@functools.cache
def _module_file(dotted: str, package_root: Path = PACKAGE_ROOT) -> Path | None:
    path = package_root.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _defined(path: Path) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments, also under ``if``/``try``)."""
    names: set[str] = set()
    for node in _parsed(path).body:
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(sub.name)
            elif isinstance(sub, ast.Assign):
                for target in sub.targets:
                    elts = target.elts if isinstance(target, ast.Tuple) else [target]
                    names.update(e.id for e in elts if isinstance(e, ast.Name))
            elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
                names.add(sub.target.id)
    return names


def _source_module(path: Path, node: ast.ImportFrom, package_root: Path) -> str | None:
    """The package module an import reads from (None: another package's, or a relative import elsewhere)."""
    if not node.level:
        return node.module if node.module and node.module.split(".")[0] == "chuixiang" else None
    if package_root not in path.parents:
        return None
    package = list(path.relative_to(package_root).parent.parts)
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *(node.module.split(".") if node.module else [])])


def _package_imports(files: Iterable[Path], package_root: Path) -> Iterator[tuple[Path, ast.ImportFrom, str]]:
    """Each ``from … import`` of a package module: the importing file, the statement, the module it reads."""
    for path in files:
        for node in _imports_from(path):
            if module := _source_module(path, node, package_root):
                yield path, node, module


def violations(files: Iterable[Path], package_root: Path = PACKAGE_ROOT) -> list[str]:
    """Each name imported from a plain module of the package that does not define it."""
    defined: dict[Path, set[str]] = {}
    found = []
    for path, node, module in _package_imports(files, package_root):
        source = _module_file(module, package_root)
        if source is None or source.name == "__init__.py":  # a package's face may re-export
            continue
        if source not in defined:
            defined[source] = _defined(source)
        for alias in node.names:
            if alias.name not in defined[source] and _module_file(f"{module}.{alias.name}", package_root) is None:
                found.append(f"{path}:{node.lineno}: {alias.name} from {module}, which does not define it")
    return found


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """Each file parsed once for both rules (the walk reads every Python file of the repository).

    Parsed again on CPython 3.11's spurious ``SystemError: AST constructor recursion depth mismatch``: its AST
    builder keeps one depth counter for every thread (python/cpython#106905), and on a pytest-xdist worker a
    thread an earlier module left (a server rendering a template) may compile at the same moment."""
    source = path.read_text()
    for _ in range(2):
        try:
            return ast.parse(source)
        except SystemError as error:
            if "recursion depth mismatch" not in str(error):
                raise
    return ast.parse(source)


@functools.cache
def _imports_from(path: Path) -> list[ast.ImportFrom]:
    """Every ``from … import`` of a file, at any depth: walked once for the three rules."""
    return [node for node in ast.walk(_parsed(path)) if isinstance(node, ast.ImportFrom)]


def _project_files() -> Iterator[Path]:
    for folder in IMPORTERS:
        for path in (ROOT / folder).rglob("*.py"):
            if not any(part.startswith(".") or part in ("__pycache__", "node_modules") for part in path.parts):
                yield path


def test_every_name_is_imported_from_where_it_is_defined() -> None:
    assert violations(_project_files()) == []


def test_the_rule_sees_a_re_export_and_allows_a_packages_face(tmp_path: Path) -> None:
    package = tmp_path / "chuixiang"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "clock.py").write_text("def now() -> int:\n    return 0\n")
    (package / "relay.py").write_text("from .clock import now\n")  # passes ``now`` on
    (package / "inner" / "__init__.py").write_text("from ..clock import now\n")  # a face: allowed
    user = package / "user.py"
    user.write_text("from .relay import now\nfrom .clock import now as direct\nfrom .inner import now as faced\n")
    found = violations([user], tmp_path)
    assert len(found) == 1 and "now from chuixiang.relay" in found[0], found


PRIVATE_IMPORT_ROOTS = ("chuixiang", "chuixiang_local", "stack_template", "model_samples")


def private_imports(files: Iterable[Path]) -> list[str]:
    """Each ``_name`` (not a dunder) imported from a module of the package or the runner."""
    found = []
    for path in files:
        for node in _imports_from(path):
            ours = node.level > 0 or (node.module or "").split(".")[0] in PRIVATE_IMPORT_ROOTS
            for alias in node.names if ours else []:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{path}:{node.lineno}: {alias.name} from {node.module}")
    return found


def test_no_module_imports_anothers_private_name() -> None:
    assert private_imports(_project_files()) == []


def test_the_private_rule_sees_one(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text("from chuixiang.stores.images import _s3\nfrom chuixiang.x import __version__\n")
    assert [f.rsplit(": ", 1)[1] for f in private_imports([user])] == ["_s3 from chuixiang.stores.images"]


def private_module_imports(files: Iterable[Path], package_root: Path = PACKAGE_ROOT) -> list[str]:
    """Each import of a package's private module (``_slots``: the package's business, behind its face) from
    outside that package."""
    found = []
    for path, node, module in _package_imports(files, package_root):
        targets = [module, *(f"{module}.{a.name}" for a in node.names if a.name.startswith("_"))]
        for target in targets:
            parts = target.split(".")
            private = [i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")]
            if not private or _module_file(target, package_root) is None:
                continue
            home = package_root.joinpath(*parts[: private[0]])
            if home not in path.parents:
                found.append(f"{path}:{node.lineno}: {target} is private to {'.'.join(parts[: private[0]])}")
    return found


def test_a_packages_private_modules_are_imported_only_inside_it() -> None:
    assert private_module_imports(_project_files()) == []


def test_the_private_module_rule_sees_one(tmp_path: Path) -> None:
    package = tmp_path / "chuixiang" / "stores" / "admission"
    package.mkdir(parents=True)
    for name in ("__init__.py", "_slots.py", "_state.py"):
        (package / name).write_text("X = 1\n")
    (package / "_slots.py").write_text("from ._state import X\n")  # a sibling: allowed
    outside = tmp_path / "chuixiang" / "job_start.py"
    outside.write_text("from .stores.admission._state import X\nfrom .stores.admission import X as faced\n")
    found = private_module_imports([package / "_slots.py", outside], tmp_path)
    assert len(found) == 1 and "chuixiang.stores.admission._state" in found[0], found
