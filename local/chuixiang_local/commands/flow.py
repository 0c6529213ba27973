"""The state machine's flow as a table, generated from ``statemachine/recipe.asl.json`` (``make docs`` writes it
into ``docs/architecture.md``; a test fails when it is stale): every state, what it runs, where it goes next,
where each choice and each caught error leads. A drawing by hand went stale twice; this cannot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stack_template import Template

#: How each Choice comparator reads in the table.
_COMPARATORS = {
    "BooleanEquals": "=",
    "StringEquals": "=",
    "NumericEquals": "=",
    "NumericGreaterThan": ">",
    "NumericLessThan": "<",
}
#: What a state that runs nothing is, in the table.
_KINDS = {"Pass": "pass", "Choice": "choice", "Succeed": "**succeeds**", "Fail": "**fails**"}  # nosec B105  # ASL state types
#: The type tests, as a phrase of their own.
_TESTS = {"IsPresent": "is present", "IsNumeric": "is a number", "IsNull": "is null", "IsString": "is a string"}


def _rule(rule: Mapping[str, Any]) -> str:
    """A Choice rule as text: ``$.valid = false``, ``not(…)``, ``… and …``."""
    if "Not" in rule:
        return f"not ({_rule(rule['Not'])})"
    for joiner in ("And", "Or"):
        if joiner in rule:
            return f" {joiner.lower()} ".join(_rule(r) for r in rule[joiner])
    for key, phrase in _TESTS.items():
        if key in rule:
            return f"`{rule['Variable']}` {phrase if rule[key] else phrase.replace('is', 'is not', 1)}"
    for key, word in _COMPARATORS.items():
        if key in rule:
            value = str(rule[key]).lower() if isinstance(rule[key], bool) else rule[key]
            return f"`{rule['Variable']}` {word} {value}"
    raise ValueError(f"a Choice rule this table does not read: {rule}")


def _what(state: Mapping[str, Any], functions: Mapping[str, str]) -> str:
    kind = state["Type"]
    if kind != "Task":
        return _KINDS.get(kind, str(kind))
    resource = str(state.get("Resource", ""))
    parameters = state.get("Parameters") or {}
    if resource.endswith(":lambda:invoke"):
        function = str(parameters.get("FunctionName", ""))
        name = next((lid for arn, lid in functions.items() if function.startswith(arn)), function)
        timeout = state.get("TimeoutSeconds") or f"`{state.get('TimeoutSecondsPath')}`"
        return f"Lambda `{name}` (state timeout {timeout}{' s' if isinstance(timeout, int) else ''})"
    if ":dynamodb:" in resource:
        return f"DynamoDB `{resource.rsplit(':', 1)[-1]}`"
    return f"`{resource}`"


def _next(state: Mapping[str, Any]) -> str:
    if state["Type"] == "Choice":
        ways = [f"{_rule(c)} → {c['Next']}" for c in state.get("Choices", [])]
        return "; ".join([*ways, f"otherwise → {state['Default']}"])
    return str(state.get("Next", "(end)"))


def _caught(state: Mapping[str, Any]) -> str:
    out = []
    for catch in state.get("Catch", []):
        errors = ", ".join("any error" if e == "States.ALL" else f"`{e}`" for e in catch["ErrorEquals"])
        out.append(f"{errors} → {catch['Next']}")
    for retry in state.get("Retry", []):
        out.append(f"retried {retry.get('MaxAttempts', 3)}x on {_family(retry['ErrorEquals'])}")
    return "; ".join(out)


def _family(errors: list[str]) -> str:
    """A Retry's errors in a few words: Lambda's service errors, DynamoDB's throttling, or their names."""
    if all(e.startswith("Lambda.") for e in errors):
        return "Lambda's service errors (a throttle among them)"
    if all(e.startswith("DynamoDB.") for e in errors):
        return "DynamoDB's throttling and internal errors"
    return ", ".join(f"`{e}`" for e in errors)


def markdown_table(template: Template | None = None) -> str:
    template = template or Template()
    _, _, definition = template.state_machine()
    functions = {template.physical[lid]["Arn"]: lid for lid in template.functions()}
    rows = [
        f"Starts at **{definition['StartAt']}**; the whole execution times out after "
        f"`StateMachineTimeout` ({definition['TimeoutSeconds']} s).",
        "",
        "| state | runs | then | on error |",
        "|---|---|---|---|",
    ]
    for name, state in definition["States"].items():
        rows.append(f"| {name} | {_what(state, functions)} | {_next(state)} | {_caught(state)} |")
    return "\n".join(rows)
