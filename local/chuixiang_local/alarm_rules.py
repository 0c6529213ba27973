"""The template's alarms, evaluated for one period as CloudWatch evaluates them, so their thresholds are tested.

The local cloud creates no CloudWatch alarm, and cfn-lint only says an alarm is well formed: whether one
failure in a quiet hour pages, or a total outage at four jobs an hour does not, is in the metric math. This
evaluates that math for the figures a test gives each metric id (``None``: no data in the period):

* arithmetic, comparisons, ``IF(cond, a, b)``, ``IF(cond, a)`` and ``FILL(x, c)``, as metric math does them: a
  missing operand or a division by zero gives no value; ``IF`` is true for a non-zero condition, and without a
  false value a false condition gives no value ("an empty time series, if … scalar3/metric3 is omitted"); a Metrics
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
import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

from stack_template import Template

Figures = Mapping[str, float | None]

_ARITHMETIC: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
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
#: An alarm's metric math, compiled: the figures known so far (by metric id) to the expression's value.
Program = Callable[[Mapping[str, float | None]], float | None]
_RULE_ALARM = re.compile(r'ALARM\("\$\{(\w+)\.Arn\}"\)')


class AlarmRules:
    """The alarms of one deployment of the template (its parameters resolve the thresholds and expressions)."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.resources: dict[str, Any] = template.doc["Resources"]
        self._programs: dict[str, tuple[list[tuple[str, Program]], str]] = {}
        self._rules: dict[str, tuple[list[str], ast.AST]] = {}
        self._thresholds: dict[str, float] = {}

    def value(self, alarm: str, figures: Figures) -> float | None:
        """The alarm's value for one period: its returned expression over ``figures`` (by metric id), or for a
        single-metric alarm the figure of its metric name."""
        props = self.resources[alarm]["Properties"]
        if "MetricName" in props:
            return figures.get(props["MetricName"])
        known: dict[str, float | None] = dict(figures)
        expressions, returned = self._program(alarm)
        for metric_id, program in expressions:
            known[metric_id] = program(known)
        return known.get(returned)

    def _program(self, alarm: str) -> tuple[list[tuple[str, Program]], str]:
        """The alarm's expressions, parsed once (in order), and the id it returns."""
        if alarm not in self._programs:
            expressions: list[tuple[str, Program]] = []
            returned = None
            for metric in self.resources[alarm]["Properties"]["Metrics"]:
                expression = str(self.template.resolve(metric.get("Expression", "")))
                if expression and not expression.startswith("SELECT "):  # a Metrics Insights query is a figure
                    python = expression.replace("^", "**")  # metric math's power operator
                    expressions.append((metric["Id"], _compile(ast.parse(python, mode="eval").body)))
                if metric.get("ReturnData", True):
                    returned = metric["Id"]
            if returned is None:
                raise ValueError(f"{alarm} returns no metric")
            self._programs[alarm] = (expressions, returned)
        return self._programs[alarm]

    def breaches(self, alarm: str, figures: Figures) -> bool:
        props = self.resources[alarm]["Properties"]
        if "ThresholdMetricId" in props:
            raise ValueError(f"{alarm}: an anomaly-detection band is not modelled")
        value = self.value(alarm, figures)
        if value is None:
            return bool(props.get("TreatMissingData") == "breaching")
        return self.breaches_value(alarm, value)

    def breaches_value(self, alarm: str, value: float) -> bool:
        """The alarm's comparison for one value. A value equal to the threshold in decimal is equal here too:
        36 bad of 250 against 0.99 is a burn of exactly 14.4, but ``0.144 / (1 - 0.99)`` is 14.399999999999986 in
        binary floating point; the comparison must not turn on the last bit."""
        props = self.resources[alarm]["Properties"]
        if alarm not in self._thresholds:
            self._thresholds[alarm] = float(self.template.resolve(props["Threshold"]))
        threshold = self._thresholds[alarm]
        if math.isclose(value, threshold, rel_tol=1e-9, abs_tol=1e-12):
            value = threshold
        return _THRESHOLD[props["ComparisonOperator"]](value, threshold)

    def composite(self, alarm: str, in_alarm: Mapping[str, bool]) -> bool:
        """Whether a composite's rule holds, given which of the alarms it names are in ALARM."""
        if alarm not in self._rules:
            text = self._rule(alarm)
            python = _RULE_ALARM.sub(lambda m: m.group(1), text)
            python = re.sub(r"\bAND\b", "and", re.sub(r"\bOR\b", "or", re.sub(r"\bNOT\b", "not", python)))
            self._rules[alarm] = (_RULE_ALARM.findall(text), ast.parse(python, mode="eval").body)
        named, rule = self._rules[alarm]
        return _holds(rule, {name: bool(in_alarm.get(name)) for name in named})

    def parts(self, alarm: str) -> list[str]:
        """The alarms a composite's rule names, by logical id."""
        return _RULE_ALARM.findall(self._rule(alarm))

    def _rule(self, alarm: str) -> str:
        rule = self.resources[alarm]["Properties"]["AlarmRule"]
        return str(rule["Fn::Sub"] if isinstance(rule, dict) else rule)


def _compile(node: ast.AST) -> Program:
    """The expression as a function of the known figures, built once (a week simulated minute by minute
    evaluates each alarm's math half a million times)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        constant = float(node.value)
        return lambda known: constant
    if isinstance(node, ast.Name):
        name = node.id
        return lambda known: known[name]
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _binary(
            _ARITHMETIC[type(node.op)], _compile(node.left), _compile(node.right), isinstance(node.op, ast.Div)
        )
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        compare, left, right = _COMPARE[type(node.ops[0])], _compile(node.left), _compile(node.comparators[0])

        def compared(known: Mapping[str, float | None]) -> float | None:
            a, b = left(known), right(known)
            return None if a is None or b is None else (1.0 if compare(a, b) else 0.0)

        return compared
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _function(node.func.id, [_compile(a) for a in node.args])
    raise ValueError(f"not modelled: {ast.unparse(node)}")


def _binary(op: Callable[[float, float], float], left: Program, right: Program, divides: bool) -> Program:
    def applied(known: Mapping[str, float | None]) -> float | None:
        a, b = left(known), right(known)
        if a is None or b is None or (divides and b == 0):
            return None  # a missing operand, or a division by zero: no value
        return op(a, b)

    return applied


def _function(name: str, args: list[Program]) -> Program:
    if name == "FILL" and len(args) == 2:
        value, filler = args
        return lambda known: v if (v := value(known)) is not None else filler(known)
    if name == "IF" and len(args) in (2, 3):
        condition, then = args[0], args[1]
        otherwise = args[2] if len(args) == 3 else None

        def chosen(known: Mapping[str, float | None]) -> float | None:
            holds = condition(known)
            if holds is None:
                return None
            if holds:
                return then(known)
            return otherwise(known) if otherwise is not None else None  # no false value: no data point

        return chosen
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
