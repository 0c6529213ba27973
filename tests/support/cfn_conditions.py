"""A transformed template as CloudFormation would create it in one partition: its conditions evaluated,
``Fn::If`` taken, ``AWS::NoValue`` dropped, conditional resources left out when their condition is false.

Only what deciding *what is created* needs: ``Ref`` of parameters, pseudo parameters and resources, and ``Fn::If``
(a nested template's parameter as the app passes it), inside conditions;
every other intrinsic is left as written (the detectors of ``tests/pipeline/test_china.py`` read literals).
"""

from __future__ import annotations

from typing import Any

NO_VALUE = object()

PARTITIONS = {"cn-": "aws-cn", "us-gov-": "aws-us-gov"}


def partition_of(region: str) -> str:
    return next((p for prefix, p in PARTITIONS.items() if region.startswith(prefix)), "aws")


class Created:
    """``doc`` (SAM's output, whose ``Parameters`` defaults carry the deploy's values) in ``region``."""

    def __init__(self, doc: dict[str, Any], region: str) -> None:
        self.doc = doc
        self.pseudo = {"AWS::Region": region, "AWS::Partition": partition_of(region), "AWS::NoValue": ""}
        self.params = {k: str(v.get("Default", "")) for k, v in doc.get("Parameters", {}).items()}
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            self._conditions[name] = self._holds(self.doc["Conditions"][name])
        return self._conditions[name]

    def _value(self, expr: Any) -> str:
        if isinstance(expr, dict) and set(expr) == {"Fn::If"}:  # a nested template's parameter, as passed
            name, if_true, if_false = expr["Fn::If"]
            return self._value(if_true if self.condition(name) else if_false)
        if isinstance(expr, dict) and set(expr) == {"Ref"}:
            name = expr["Ref"]
            if name in self.pseudo:
                return self.pseudo[name]
            # A resource's Ref (its name or ARN) is never empty: only whether it is empty is compared.
            return self.params.get(name, f"<{name}>")
        if isinstance(expr, (str, int, float, bool)):
            return str(expr)
        raise ValueError(f"a condition compares {expr!r}, which this reader does not evaluate")

    def _holds(self, expr: dict[str, Any]) -> bool:
        ((fn, arg),) = expr.items()
        if fn == "Condition":
            return self.condition(arg)
        if fn == "Fn::Equals":
            return self._value(arg[0]) == self._value(arg[1])
        if fn == "Fn::Not":
            return not self._holds(arg[0])
        if fn == "Fn::And":
            return all(self._holds(a) for a in arg)
        if fn == "Fn::Or":
            return any(self._holds(a) for a in arg)
        raise ValueError(f"condition function {fn} is not evaluated here")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [v for v in (self.resolve(v) for v in value) if v is not NO_VALUE]
        if isinstance(value, dict):
            if value == {"Ref": "AWS::NoValue"}:
                return NO_VALUE
            if set(value) == {"Fn::If"}:
                name, if_true, if_false = value["Fn::If"]
                return self.resolve(if_true if self.condition(name) else if_false)
            pairs = ((k, self.resolve(v)) for k, v in value.items())
            return {k: v for k, v in pairs if v is not NO_VALUE}
        return value

    def resources(self) -> dict[str, dict[str, Any]]:
        """The resources created, each with its properties resolved."""
        return {
            lid: self.resolve(r)
            for lid, r in self.doc["Resources"].items()
            if "Condition" not in r or self.condition(r["Condition"])
        }
