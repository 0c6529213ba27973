"""The template's alarms, evaluated for one period as CloudWatch evaluates them, so their thresholds are tested.

The local cloud creates no CloudWatch alarm, and cfn-lint only says an alarm is well formed: whether one
failure in a quiet hour pages, or a total outage at four jobs an hour does not, is in the metric math. This
evaluates that math for the figures a test gives each metric id (``None``: no data in the period):

* arithmetic, comparisons, ``IF(cond, a, b)`` and ``FILL(x, c)``, as metric math does them: a missing
  operand or a division by zero gives no value; ``IF`` is true for a non-zero condition; a Metrics
  Insights query (``SELECT …``) is a figure the test gives, like a metric's;
* the alarm's ``ComparisonOperator`` against its ``Threshold``, a period without a value by its
  ``TreatMissingData`` (``breaching`` breaches, anything else does not);
* a composite alarm's ``AlarmRule`` over the states of the alarms it names (``ALARM(...)``, ``AND``, ``OR``,
  ``NOT``).

What it does not model: anomaly-detection bands, M-of-N across periods (``DatapointsToAlarm``), statistics
(a test gives each id its period's statistic already: a sum, a p90, a ``PR(:x)`` percentage).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from chuixiang_local.template import Template

Figures = Mapping[str, float | None]

_ARITHMETIC: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_COMPARE: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
}
_THRESHOLD: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": operator.gt,
    "GreaterThanOrEqualToThreshold": operator.ge,
    "LessThanThreshold": operator.lt,
    "LessThanOrEqualToThreshold": operator.le,
}
_RULE_ALARM = re.compile(r'ALARM\("\$\{(\w+)\.Arn\}"\)')


class AlarmRules:
    """The alarms of one deployment of the template (its parameters resolve the thresholds and expressions)."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.resources: dict[str, Any] = template.doc["Resources"]

    def value(self, alarm: str, figures: Figures) -> float | None:
        """The alarm's value for one period: its returned expression over ``figures`` (by metric id), or for a
        single-metric alarm the figure of its metric name."""
        props = self.resources[alarm]["Properties"]
        if "MetricName" in props:
            return figures.get(props["MetricName"])
        known: dict[str, float | None] = dict(figures)
        returned = None
        for metric in props["Metrics"]:
            expression = str(self.template.resolve(metric.get("Expression", "")))
            if expression and not expression.startswith("SELECT "):  # a Metrics Insights query is a figure
                known[metric["Id"]] = _evaluate(ast.parse(expression, mode="eval").body, known)
            if metric.get("ReturnData", True):
                returned = metric["Id"]
        if returned is None:
            raise ValueError(f"{alarm} returns no metric")
        return known.get(returned)

    def breaches(self, alarm: str, figures: Figures) -> bool:
        props = self.resources[alarm]["Properties"]
        if "ThresholdMetricId" in props:
            raise ValueError(f"{alarm}: an anomaly-detection band is not modelled")
        value = self.value(alarm, figures)
        if value is None:
            return bool(props.get("TreatMissingData") == "breaching")
        threshold = float(self.template.resolve(props["Threshold"]))
        return _THRESHOLD[props["ComparisonOperator"]](value, threshold)

    def composite(self, alarm: str, in_alarm: Mapping[str, bool]) -> bool:
        """Whether a composite's rule holds, given which of the alarms it names are in ALARM."""
        text = self._rule(alarm)
        named = _RULE_ALARM.findall(text)
        python = _RULE_ALARM.sub(lambda m: m.group(1), text)
        python = re.sub(r"\bAND\b", "and", re.sub(r"\bOR\b", "or", re.sub(r"\bNOT\b", "not", python)))
        return _holds(ast.parse(python, mode="eval").body, {name: bool(in_alarm.get(name)) for name in named})

    def parts(self, alarm: str) -> list[str]:
        """The alarms a composite's rule names, by logical id."""
        return _RULE_ALARM.findall(self._rule(alarm))

    def _rule(self, alarm: str) -> str:
        rule = self.resources[alarm]["Properties"]["AlarmRule"]
        return str(rule["Fn::Sub"] if isinstance(rule, dict) else rule)


def _evaluate(node: ast.AST, known: Mapping[str, float | None]) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.Name):
        return known[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _evaluate(node.left, known), _evaluate(node.right, known)
        if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
            return None
        return _ARITHMETIC[type(node.op)](left, right)
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        left, right = _evaluate(node.left, known), _evaluate(node.comparators[0], known)
        if left is None or right is None:
            return None
        return 1.0 if _COMPARE[type(node.ops[0])](left, right) else 0.0
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _function(node.func.id, node.args, known)
    raise ValueError(f"not modelled: {ast.unparse(node)}")


def _function(name: str, args: list[ast.expr], known: Mapping[str, float | None]) -> float | None:
    if name == "FILL" and len(args) == 2:
        value = _evaluate(args[0], known)
        return value if value is not None else _evaluate(args[1], known)
    if name == "IF" and len(args) == 3:
        condition = _evaluate(args[0], known)
        if condition is None:
            return None
        return _evaluate(args[1] if condition else args[2], known)
    raise ValueError(f"not modelled: {name}")


def _holds(node: ast.AST, states: Mapping[str, bool]) -> bool:
    if isinstance(node, ast.Name):
        return states[node.id]
    if isinstance(node, ast.BoolOp):
        results = [_holds(v, states) for v in node.values]
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _holds(node.operand, states)
    raise ValueError(f"not modelled: {ast.unparse(node)}")
