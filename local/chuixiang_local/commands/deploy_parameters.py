"""The parameters a ``sam deploy`` will really deploy, so the ladder is checked against them.

``sam deploy`` keeps a stack's previous value for every parameter not overridden again, then applies its
``--parameter-overrides``: the command line's when given, else ``samconfig.toml``'s ``parameter_overrides``.
The command line *replaces* the file's option (an option given on the command line wins over the config file's
value whole, as click reads them), it is not merged with it. Checking the template's defaults instead would pass
a ladder that the deployed stack breaks (an old 75 s limit kept from a year ago). Order, later wins: template
defaults < the deployed stack < (the command line, or else samconfig.toml).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from stack_template import parse_overrides

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
    return what_sam_deploys(
        deployed_parameters(cloudformation, stack_name), samconfig_overrides(samconfig), command_line
    )


def what_sam_deploys(
    previous: dict[str, str], samconfig: dict[str, str], command_line: dict[str, str]
) -> dict[str, str]:
    """The parameters ``sam deploy`` sends: the stack's previous values, then the overrides it was given (the
    command line's, which replace samconfig.toml's; else samconfig.toml's)."""
    return {**previous, **(command_line if command_line else samconfig)}
