"""The parameters a ``sam deploy`` will really deploy, so the ladder is checked against them.

``sam deploy`` keeps a stack's previous value for every parameter not overridden again, then applies
``samconfig.toml``'s ``parameter_overrides``, then the command line's. Checking the template's defaults
instead would pass a ladder that the deployed stack breaks (an old 75 s limit kept from a year ago).
Order, later wins: template defaults < the deployed stack < samconfig.toml < the command line.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from chuixiang_local.template import parse_overrides

#: What CloudFormation shows for a NoEcho parameter: not a value to check or pass on.
MASKED = "****"


def deployed_stack(cloudformation: Any, stack_name: str) -> dict[str, Any]:
    """The stack as CloudFormation describes it ({} when it does not exist yet)."""
    try:
        return dict(cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0])
    except ClientError as exc:
        if "does not exist" in str(exc):
            return {}
        raise


def deployed_parameters(cloudformation: Any, stack_name: str) -> dict[str, str]:
    """The stack's current parameter values ({} when it does not exist yet)."""
    return {
        p["ParameterKey"]: p["ParameterValue"]
        for p in deployed_stack(cloudformation, stack_name).get("Parameters", [])
        if p.get("ParameterValue") not in (None, MASKED)
    }


def deployed_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    """The stack's outputs ({} when it does not exist yet)."""
    return {o["OutputKey"]: o["OutputValue"] for o in deployed_stack(cloudformation, stack_name).get("Outputs", [])}


def samconfig_overrides(path: Path, environment: str = "default") -> dict[str, str]:
    """``[<environment>.deploy.parameters] parameter_overrides`` (a string "K=V K=V" or a list of them)."""
    if not path.exists():
        return {}
    doc = tomllib.loads(path.read_text())
    raw = doc.get(environment, {}).get("deploy", {}).get("parameters", {}).get("parameter_overrides")
    if not raw:
        return {}
    return parse_overrides(raw if isinstance(raw, list) else [str(raw)])


def samconfig_stack_name(path: Path, environment: str = "default") -> str | None:
    if not path.exists():
        return None
    doc = tomllib.loads(path.read_text())
    for section in ("deploy", "global"):
        name = doc.get(environment, {}).get(section, {}).get("parameters", {}).get("stack_name")
        if name:
            return str(name)
    return None


def effective_overrides(
    cloudformation: Any, stack_name: str, samconfig: Path, command_line: dict[str, str]
) -> dict[str, str]:
    return {**deployed_parameters(cloudformation, stack_name), **samconfig_overrides(samconfig), **command_line}
