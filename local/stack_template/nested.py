"""A template with its local nested applications read into it, as one stack: what the app creates in all.

``template.yaml`` keeps its observability (alarms, dashboard, saved queries) in a nested application
(``AWS::Serverless::Application`` with a local ``Location``, which ``sam build`` and ``sam package`` carry as
its own template). CloudFormation creates the two as two stacks; every local reader (the local cloud, the
alarm evaluator, the China and IAM checks, the dashboard) wants the resources the app creates, so it reads
them through :func:`inline_nested`:

- the child's resources take the application's place, under their own logical ids (a clash is an error);
- a ``Ref`` to one of the child's parameters becomes the expression the parent passes for it (or the
  parameter's default), so it resolves in the parent's terms; in a ``Fn::Sub`` string it becomes a variable;
- the child's conditions are renamed ``<application><condition>``, so they cannot shadow the parent's.

A child that asks for its own ``AWS::StackName`` is refused: it is the nested stack's name on AWS, which no
local name stands for (the app passes its own as a parameter instead).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from stack_template.cfn_yaml import ConfigError, load_cfn

APPLICATION = "AWS::Serverless::Application"
_SUB_NAME = re.compile(r"\$\{([^}!.]+)\}")


def local_location(resource: dict[str, Any]) -> str | None:
    """The template path of a nested application kept beside the parent, or None."""
    if resource.get("Type") != APPLICATION:
        return None
    location = resource.get("Properties", {}).get("Location")
    return location if isinstance(location, str) and "://" not in location else None


def nested_paths(doc: dict[str, Any], root: Path) -> list[Path]:
    """Every local nested template ``doc`` names (what a digest of the whole app must cover)."""
    return [root / loc for r in doc["Resources"].values() if (loc := local_location(r)) is not None]


class _Binder:
    """Rewrites one child's fragment in the parent's terms (see the module's docstring)."""

    def __init__(self, app: str, values: dict[str, Any], conditions: set[str]) -> None:
        self.app, self.values, self.conditions = app, values, conditions

    def condition(self, name: str) -> str:
        return f"{self.app}{name}" if name in self.conditions else name

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            bound = self._intrinsic(key, arg)
            if bound is not None:
                return bound
        return {k: self.condition(v) if k == "Condition" and isinstance(v, str) else self(v) for k, v in value.items()}

    def _intrinsic(self, key: str, arg: Any) -> Any:
        if key == "Ref" and arg == "AWS::StackName":
            raise self._own_stack_name()
        if key == "Ref" and arg in self.values:
            return copy.deepcopy(self.values[arg])
        if key == "Fn::If":
            name, if_true, if_false = arg
            return {"Fn::If": [self.condition(name), self(if_true), self(if_false)]}
        if key == "Fn::Sub":
            return self._sub(arg)
        return None

    def _own_stack_name(self) -> ConfigError:
        return ConfigError(f"{self.app}: a nested template's AWS::StackName is not the app's; pass it as a parameter")

    def _sub(self, arg: Any) -> dict[str, Any]:
        text, own = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        used = set(_SUB_NAME.findall(text))
        if "AWS::StackName" in used:
            raise self._own_stack_name()
        variables = {k: self(v) for k, v in own.items()}
        variables |= {name: copy.deepcopy(self.values[name]) for name in used - set(own) if name in self.values}
        return {"Fn::Sub": [text, variables] if variables else text}


def _child(app: str, resource: dict[str, Any], root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(resources, conditions) of one nested application, in the parent's terms."""
    if "Condition" in resource:
        raise ConfigError(f"{app}: a conditional nested application is not read locally")
    location = local_location(resource)
    assert location is not None  # nosec B101  # the caller asked local_location first
    doc: dict[str, Any] = load_cfn((root / location).read_text())
    declared: dict[str, Any] = doc.get("Parameters", {})
    passed: dict[str, Any] = resource.get("Properties", {}).get("Parameters", {})
    unknown = sorted(set(passed) - set(declared))
    missing = sorted(p for p in declared if p not in passed and "Default" not in declared[p])
    if unknown or missing:
        raise ConfigError(f"{app} ({location}): parameters unknown {unknown}, missing {missing}")
    values = {p: passed[p] if p in passed else str(declared[p]["Default"]) for p in declared}
    own_conditions: dict[str, Any] = doc.get("Conditions", {})
    bind = _Binder(app, values, set(own_conditions))
    conditions = {bind.condition(name): bind(expr) for name, expr in own_conditions.items()}
    return {lid: bind(r) for lid, r in doc["Resources"].items()}, conditions


def inline_nested(doc: dict[str, Any], root: Path) -> dict[str, Any]:
    """``doc`` with each local nested application replaced by its template's resources (see the module)."""
    resources: dict[str, Any] = {}
    conditions: dict[str, Any] = dict(doc.get("Conditions", {}))
    for lid, resource in doc["Resources"].items():
        if local_location(resource) is None:
            resources[lid] = resource
            continue
        child, child_conditions = _child(lid, resource, root)
        clash = sorted((set(child) & set(doc["Resources"])) | (set(child) & set(resources)))
        if clash:
            raise ConfigError(f"{lid}: its resources {clash} have the logical ids of the app's own")
        resources |= child
        conditions |= child_conditions
    return {**doc, "Resources": resources, "Conditions": conditions}
