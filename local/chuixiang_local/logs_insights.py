"""The saved Logs Insights queries of ``template.yaml``, run over a local functions log, so a query that names a
field no function logs, or counts the wrong line, fails a test instead of an on-call's night.

The subset of the query language the saved queries use (CloudWatch Logs user guide, *CloudWatch Logs Insights
language query syntax*): ``filter`` (``=``, ``!=``, ``<``, ``>``, ``and``, ``or``, ``not``, ``in [...]``,
``ispresent(f)``), ``fields``, ``stats`` (``count(*)``, ``count(f)``, ``sum``, ``min``, ``max``, ``avg``,
``latest``, each ``as`` a name) ``by`` fields (``f as g`` too), ``sort f asc|desc`` and ``limit n``. A command or
function outside it raises, never passes silently. Records are the log's JSON lines (Powertools' structured
logs; an EMF line is a record too, as CloudWatch Logs discovers its fields); ``@timestamp`` is the record's
``timestamp``.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

Record = dict[str, Any]

_STAT = re.compile(r"(count|sum|min|max|avg|latest)\(([\w@.*]+)\)(?:\s+as\s+(\w+))?")
_NAME = re.compile(r"([\w@.]+)(?:\s+as\s+(\w+))?")


def records(log: Path) -> list[Record]:
    out = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            record.setdefault("@timestamp", record.get("timestamp"))
            out.append(record)
    return out


def run(query: str, rows: Iterable[Record]) -> list[Record]:
    result = list(rows)
    for command in _commands(query):
        verb, _, rest = command.partition(" ")
        result = _VERBS[verb](rest.strip(), result)
    return result


def _commands(query: str) -> list[str]:
    """The query's commands: one per ``|``, with their continuation lines joined."""
    return [" ".join(part.split()) for part in query.strip().split("|") if part.strip()]


def _filter(expression: str, rows: list[Record]) -> list[Record]:
    predicate = _predicate(expression)
    return [row for row in rows if predicate(row)]


def _predicate(expression: str) -> Callable[[Record], bool]:
    """A filter expression, parsed once: Logs Insights' ``=`` is Python's ``==``, its ``and``/``or``/``not``/``in``
    are Python's, a bare name is a field (absent: None)."""
    python = re.sub(r'("[^"]*")|(?<![=!<>])=(?!=)', lambda m: m.group(1) or "==", expression)
    tree = ast.parse(python, mode="eval").body
    return lambda row: bool(_value(tree, row))


_OPERATORS: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a is not None and b is not None and a < b,
    ast.Gt: lambda a, b: a is not None and b is not None and a > b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


def _value(node: ast.AST, row: Record) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return row.get(node.id)
    if isinstance(node, ast.List):
        return [_value(e, row) for e in node.elts]
    if isinstance(node, ast.BoolOp):
        values = (_value(v, row) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _value(node.operand, row)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPERATORS:
        return _OPERATORS[type(node.ops[0])](_value(node.left, row), _value(node.comparators[0], row))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ispresent":
        [field] = node.args
        return isinstance(field, ast.Name) and row.get(field.id) is not None
    raise ValueError(f"not modelled in a filter: {ast.unparse(node)}")


def _fields(spec: str, rows: list[Record]) -> list[Record]:
    names = [n.strip() for n in spec.split(",")]
    return [{name: row.get(name) for name in names} for row in rows]


def _stats(spec: str, rows: list[Record]) -> list[Record]:
    aggregates, _, by = spec.partition(" by ")
    keys = [(m.group(1), m.group(2) or m.group(1)) for m in _NAME.finditer(by)] if by else []
    stats = [(m.group(1), m.group(2), m.group(3) or f"{m.group(1)}({m.group(2)})") for m in _STAT.finditer(aggregates)]
    if len(stats) != aggregates.count("("):
        raise ValueError(f"not modelled: stats {aggregates}")
    groups: dict[tuple[Any, ...], list[Record]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(field) for field, _ in keys), []).append(row)
    out = []
    for key, members in groups.items():
        result = {alias: value for (_, alias), value in zip(keys, key, strict=True)}
        for function, field, alias in stats:
            result[alias] = _aggregate(function, field, members)
        out.append(result)
    return out


def _aggregate(function: str, field: str, rows: list[Record]) -> Any:
    if function == "count":
        return len(rows) if field == "*" else sum(1 for r in rows if r.get(field) is not None)
    values = [r[field] for r in rows if r.get(field) is not None]
    if function == "latest":
        return values[-1] if values else None
    numbers = [float(v) for v in values]
    if not numbers:
        return None
    reduce: dict[str, Callable[[list[float]], float]] = {
        "sum": sum,
        "min": min,
        "max": max,
        "avg": lambda n: sum(n) / len(n),
    }
    return reduce[function](numbers)


def _sort(spec: str, rows: list[Record]) -> list[Record]:
    field, _, order = spec.partition(" ")
    present = [r for r in rows if r.get(field) is not None]
    absent = [r for r in rows if r.get(field) is None]
    return sorted(present, key=lambda r: r[field], reverse=order.strip() == "desc") + absent


def _limit(spec: str, rows: list[Record]) -> list[Record]:
    return rows[: int(spec)]


_VERBS: dict[str, Callable[[str, list[Record]], list[Record]]] = {
    "filter": _filter,
    "fields": _fields,
    "stats": _stats,
    "sort": _sort,
    "limit": _limit,
}
