"""``chuixiang dashboard``: the template's own dashboard, drawn from the metrics local runs emitted.

The functions' EMF lines and the metrics the local cloud vends for Lambda and Step Functions
(``cloud/vended_metrics.py``) are read from the local logs and put through the dashboard body of
``observability/template.yaml`` (after its ``Fn::Sub``), widget by widget, in its own layout: ``SEARCH`` and ``SCHEMA``
expressions select series by namespace, metric name and dimension keys, as CloudWatch does; a metric row by
its dimensions; a math expression is computed from the rows it names. It says which widgets have data, so
"the metric names match" becomes "the on-call will see something". Alarm widgets are listed, not evaluated.

    .venv/bin/chuixiang dashboard [--logs .chuixiang/logs] [--out dashboard.png] [--strict]
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stack_template import Template

from chuixiang_local.commands.charts import pyplot

#: A series: time bucket (ms) -> the bucket's values.
Buckets = dict[int, list[float]]
SEARCH = re.compile(
    r"SEARCH\('\{(?P<schema>[^}]+)\}\s+MetricName=\"(?P<name>\w+)\"',\s*'(?P<stat>[\w.]+)',\s*(?P<p>\d+)\)"
)
SCHEMA = re.compile(r"SELECT (?P<stat>\w+)\((?P<name>\w+)\) FROM SCHEMA\((?P<schema>[^)]+)\)")
#: Dimensions whose values name a resource of the stack: compared by logical id (the stack names differ).
RESOURCE_DIMENSIONS = {"FunctionName", "StateMachineArn", "ApiId"}


@dataclass(frozen=True)
class Point:
    namespace: str
    name: str
    dims: frozenset[tuple[str, str]]
    value: float
    at_ms: int


def emf_points(lines: Iterable[str]) -> Iterator[Point]:
    """Every value of every EMF document in ``lines`` (a log mixes them with other lines)."""
    for line in lines:
        if '"_aws"' not in line or "{" not in line:
            continue
        try:
            doc = json.loads(line[line.index("{") :])
        except ValueError:
            continue
        meta = doc.get("_aws", {}) if isinstance(doc, dict) else {}
        for directive in meta.get("CloudWatchMetrics", []):
            for keys in directive.get("Dimensions", []):
                dims = frozenset((k, str(doc.get(k))) for k in keys)
                for metric in directive.get("Metrics", []):
                    values = doc.get(metric["Name"])
                    for value in values if isinstance(values, list) else [values]:
                        if isinstance(value, int | float):
                            yield Point(directive["Namespace"], metric["Name"], dims, float(value), meta["Timestamp"])


def read_points(paths: Iterable[Path]) -> list[Point]:
    files = [f for p in paths for f in (sorted(p.rglob("*")) if p.is_dir() else [p]) if f.is_file()]
    return [pt for f in files for pt in emf_points(f.read_text(errors="replace").splitlines())]


def resource_key(value: str) -> str:
    """``chuixiang-x1-ApiFunction`` and ``arn:…:stateMachine:chuixiang-local-RecipeStateMachine``: their logical id."""
    return value.rsplit(":", 1)[-1].rsplit("-", 1)[-1]


def aggregate(values: list[float], stat: str) -> float:
    ordered = sorted(values)
    if stat.lower().startswith("p"):
        rank = float(stat[1:]) / 100 * (len(ordered) - 1)
        return ordered[round(rank)]
    table: dict[str, Callable[[list[float]], float]] = {
        "sum": sum,
        "average": lambda v: sum(v) / len(v),
        "maximum": max,
        "minimum": min,
        "samplecount": len,
    }
    return table[stat.lower()](ordered)


@dataclass
class Series:
    label: str
    buckets: Buckets
    stat: str
    visible: bool = True

    def values(self) -> dict[int, float]:
        return {at: aggregate(v, self.stat) for at, v in sorted(self.buckets.items())}


@dataclass
class Widget:
    title: str
    kind: str
    x: int
    y: int
    width: int
    height: int
    series: list[Series] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)
    #: The widget's horizontal annotations (a limit a series must stay under: a timeout, a concurrency cap).
    limits: list[tuple[str, float]] = field(default_factory=list)

    @property
    def has_data(self) -> bool:
        return self.kind != "metric" or any(s.buckets for s in self.series)


class Reader:
    """The points, bucketed and selected as CloudWatch selects them."""

    def __init__(self, points: list[Point]) -> None:
        self.points = points

    def bucketed(self, chosen: Iterable[Point], period: int) -> dict[frozenset[tuple[str, str]], Buckets]:
        out: dict[frozenset[tuple[str, str]], Buckets] = defaultdict(lambda: defaultdict(list))
        for p in chosen:
            out[p.dims][p.at_ms // (period * 1000) * period * 1000].append(p.value)
        return out

    def search(self, namespace: str, name: str, keys: frozenset[str], period: int) -> dict[Any, Buckets]:
        chosen = (
            p for p in self.points if (p.namespace, p.name) == (namespace, name) and {k for k, _ in p.dims} == keys
        )
        return self.bucketed(chosen, period)

    def metric(self, namespace: str, name: str, dims: dict[str, str], period: int) -> Buckets:
        def same(p: Point) -> bool:
            got = dict(p.dims)
            if (p.namespace, p.name) != (namespace, name) or set(got) != set(dims):
                return False
            return all(
                resource_key(got[k]) == resource_key(v) if k in RESOURCE_DIMENSIONS else got[k] == v
                for k, v in dims.items()
            )

        merged: Buckets = defaultdict(list)
        for buckets in self.bucketed(filter(same, self.points), period).values():
            for at, values in buckets.items():
                merged[at].extend(values)
        return merged


def _label(dims: frozenset[tuple[str, str]], name: str) -> str:
    shown = [f"{k}={v}" for k, v in sorted(dims) if k != "service"]
    return f"{name} {' '.join(shown)}".strip()


#: A math operand: a constant, one time series, or an array of them (what a ``SEARCH`` returns), labelled.
Array = list[tuple[str, dict[int, float]]]
Operand = dict[int, float] | float | Array
OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: a / b if b else math.nan,
}


@dataclass
class _Scope:
    """What a widget's math sees: its rows by id, which of them are arrays, and the widget's time buckets."""

    named: dict[str, list[Series]]
    arrays: set[str]

    @property
    def buckets(self) -> set[int]:
        return {at for rows in self.named.values() for s in rows for at in s.buckets}


def _combine(left: Operand, right: Operand, op: Callable[[float, float], float]) -> Operand:
    """As metric math combines: an array with a series or a constant, point by point, element by element."""
    if isinstance(left, list) and isinstance(right, list):
        raise ValueError("array with array")
    if isinstance(left, list):
        assert not isinstance(right, list)  # nosec B101  # narrowed above
        return [(label, _series(values, right, op)) for label, values in left]
    if isinstance(right, list):
        return [(label, _series(values, left, lambda a, b: op(b, a))) for label, values in right]
    if isinstance(left, float) and isinstance(right, float):
        return op(left, right)
    if isinstance(left, float):
        assert isinstance(right, dict)  # nosec B101  # narrowed above
        return _series(right, left, lambda a, b: op(b, a))
    return _series(left, right, op)


def _series(
    values: dict[int, float], other: dict[int, float] | float, op: Callable[[float, float], float]
) -> dict[int, float]:
    """``values op other`` at each point (a point missing from either series is missing from the result)."""
    if isinstance(other, float):
        return {k: op(v, other) for k, v in values.items()}
    return {k: op(v, other[k]) for k, v in values.items() if k in other}


def _summed(operand: Operand) -> Operand:
    if not isinstance(operand, list):
        return operand
    total: dict[int, float] = defaultdict(float)
    for _, values in operand:
        for at, v in values.items():
            total[at] += v
    return dict(total)


def _filled(operand: Operand, value: Operand, buckets: set[int]) -> Operand:
    if not isinstance(value, float):
        raise ValueError("FILL with a series")
    if isinstance(operand, list):
        return [(label, {at: values.get(at, value) for at in buckets}) for label, values in operand]
    if isinstance(operand, dict):
        return {at: operand.get(at, value) for at in buckets}
    return operand


def _operand(node: ast.AST, scope: _Scope) -> Operand:
    """A constant, a row's id (a ``SEARCH`` row is an array), ``SUM(x)``, ``FILL(x, c)``, or arithmetic of those."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        args = [_operand(a, scope) for a in node.args]
        if node.func.id == "SUM":
            return _summed(args[0])
        if node.func.id == "FILL" and len(args) == 2:
            return _filled(args[0], args[1], scope.buckets)
    if isinstance(node, ast.Name):
        rows = scope.named.get(node.id, [])
        if node.id in scope.arrays:
            return [(s.label, s.values()) for s in rows]
        return _summed([(s.label, s.values()) for s in rows])
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return _combine(_operand(node.left, scope), _operand(node.right, scope), OPS[type(node.op)])
    raise ValueError(ast.unparse(node))


def _expression_series(opts: dict[str, Any], scope: _Scope) -> list[Series]:
    """A math expression over the rows it names (``api / 1000``, ``100 * ended / SUM(ended)``), per bucket; an
    array's series keep their own labels after the expression's (``""`` keeps theirs alone). One this reader
    does not know is drawn empty."""
    label = opts.get("label", opts["expression"])
    try:
        result = _operand(ast.parse(opts["expression"], mode="eval").body, scope)
    except (ValueError, SyntaxError):
        result = {}
    if isinstance(result, float):
        result = {}
    parts = result if isinstance(result, list) else [("", result)]
    visible = opts.get("visible", True)
    return [
        Series(f"{label} {own}".strip(), {at: [v] for at, v in values.items() if not math.isnan(v)}, "Sum", visible)
        for own, values in parts
    ]


def _metric_rows(props: dict[str, Any], reader: Reader) -> list[Series]:
    """The widget's series, row by row (``.`` repeats the row above), expressions after the rows they name."""
    period, stat = int(props.get("period", 300)), props.get("stat", "Average")
    out: list[Series] = []
    named: dict[str, list[Series]] = defaultdict(list)
    previous: list[Any] = []
    expressions: list[dict[str, Any]] = []
    arrays: set[str] = set()
    for row in props.get("metrics", []):
        opts = next((v for v in row if isinstance(v, dict)), {})
        if "expression" in opts:
            found = SEARCH.search(opts["expression"]) or SCHEMA.search(opts["expression"])
            if not found:
                expressions.append(opts)
                continue
            namespace, *keys = [k.strip() for k in found["schema"].split(",")]
            p = int(found.groupdict().get("p") or period)
            arrays.add(opts.get("id", ""))
            for dims, buckets in reader.search(namespace, found["name"], frozenset(keys), p).items():
                # An expression's label prefixes each of its series' own (CloudWatch's "combination of the
                # expression label and the individual metric label"; "" keeps theirs alone).
                label = f"{opts.get('label', '')} {_label(dims, found['name'])}".strip()
                series = Series(label, buckets, found["stat"], opts.get("visible", True))
                out.append(series)
                named[opts.get("id", "")].append(series)
            continue
        values = [previous[i] if v == "." else v for i, v in enumerate(row) if not isinstance(v, dict)]
        previous = values
        namespace, name, *pairs = values
        dims = dict(zip(pairs[::2], pairs[1::2], strict=True))
        series = Series(
            opts.get("label") or _label(frozenset(dims.items()), name),
            reader.metric(namespace, name, dims, period),
            opts.get("stat", stat),
            visible=opts.get("visible", True),
        )
        out.append(series)
        named[opts.get("id", "")].append(series)
    scope = _Scope(named, arrays)
    for opts in expressions:
        computed = _expression_series(opts, scope)
        out.extend(computed)
        named[opts.get("id", "")].extend(computed)
        if len(computed) > 1:
            arrays.add(opts.get("id", ""))
    return out


def build(template: Template, points: list[Point]) -> list[Widget]:
    body = json.loads(template.resolve(template.doc["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))
    reader = Reader(points)
    widgets = []
    for w in body["widgets"]:
        props = w.get("properties", {})
        title = props.get("title") or props.get("markdown", "").split("\n")[0].replace("*", "")
        widget = Widget(title, w["type"], w["x"], w["y"], w["width"], w["height"])
        if w["type"] == "metric":
            widget.series = _metric_rows(props, reader)
            horizontal = props.get("annotations", {}).get("horizontal", [])
            widget.limits = [(str(a.get("label", "")), float(a["value"])) for a in horizontal if "value" in a]
        elif w["type"] == "alarm":
            widget.alarms = [resource_key(a) for a in props.get("alarms", [])]
        widgets.append(widget)
    return widgets


def report(widgets: list[Widget]) -> str:
    lines = []
    for w in widgets:
        if w.kind != "metric":
            continue
        shown = [s for s in w.series if s.visible and s.buckets]
        points = sum(len(v) for s in w.series for v in s.buckets.values())
        state = f"{len(shown)} series, {points} values" if w.has_data else "NO DATA"
        lines.append(f"{'ok ' if w.has_data else '-- '} {w.title[:70]:70}  {state}")
    return "\n".join(lines)


def draw(widgets: list[Widget], out: Path) -> None:
    """The widgets in the dashboard's own grid (24 columns), each series as CloudWatch would plot it."""
    plt = pyplot()

    rows = max(w.y + w.height for w in widgets)
    fig = plt.figure(figsize=(24, rows * 0.55), dpi=60)
    for w in widgets:
        ax = fig.add_axes(_rect(w, rows))
        if w.kind == "text":
            ax.axis("off")
            ax.text(0, 0.5, w.title, fontsize=13, va="center", weight="bold")
        elif w.kind == "alarm":
            ax.set_title(f"{w.title}: their states are CloudWatch's (not evaluated locally)", fontsize=11, loc="left")
            _alarm_grid(ax, w.alarms)
        else:
            ax.set_title(w.title, fontsize=11, loc="left")
            _plot(ax, w)
    fig.savefig(out)
    plt.close(fig)


def _rect(w: Widget, rows: int) -> tuple[float, float, float, float]:
    """The widget's cell in figure coordinates, less room for its title (a grid row is 1/rows high)."""
    row = 1 / rows
    title = 0.6 * row if w.kind != "text" else 0.1 * row
    bottom = 1 - (w.y + w.height) * row + 0.4 * row
    return w.x / 24 + 0.03 * w.width / 24, bottom, w.width / 24 * 0.94, w.height * row - 0.4 * row - title


#: Alarm cells per row of the status grid.
GRID_COLUMNS = 6


def _alarm_grid(ax: Any, alarms: list[str]) -> None:
    """The alarm widget as CloudWatch shows it: one cell per alarm, in rows (grey: no state known here)."""
    ax.axis("off")
    rows = max(1, -(-len(alarms) // GRID_COLUMNS))
    ax.set_xlim(0, GRID_COLUMNS)
    ax.set_ylim(rows, 0)
    for i, name in enumerate(alarms):
        col, row = i % GRID_COLUMNS, i // GRID_COLUMNS
        ax.add_patch(_cell(col, row))
        ax.text(col + 0.05, row + 0.5, name.removesuffix("Alarm"), fontsize=7, va="center")


def _cell(col: int, row: int) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((col + 0.02, row + 0.08), 0.96, 0.84, facecolor="#e8e8e8", edgecolor="#bbbbbb")


def _plot(ax: Any, w: Widget) -> None:
    """Every visible series as a line over time (a one-period run: its point), and the widget's limits as lines."""
    shown = [s for s in w.series if s.visible and s.buckets]
    if not shown:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        return
    start = min(at for s in shown for at in s.buckets)
    for s in shown:
        values = s.values()
        xs = [(at - start) / 60_000 for at in values]
        ax.plot(xs, list(values.values()), marker="o", markersize=3, linewidth=1.2, label=s.label[:48])
    for label, value in w.limits:
        ax.axhline(value, color="#b00020", linestyle="--", linewidth=1)
        ax.annotate(label[:40], (1, value), xycoords=("axes fraction", "data"), ha="right", va="bottom", fontsize=7)
    last = max((at - start) / 60_000 for s in shown for at in s.buckets)
    ax.set_xlim(-1, max(last + 1, 10))  # a run shorter than a period is one point a series, not a spike
    ax.set_xlabel("minutes since the first period", fontsize=7)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=6, loc="upper left", ncol=2 if len(shown) > 8 else 1)
