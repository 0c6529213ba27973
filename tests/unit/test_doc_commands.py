"""Every ``aws …`` command the documents tell an operator to run names an operation and options the AWS CLI v2
accepts: each is read against botocore's service models (the ones the CLI is generated from), with the CLI's
global options and its documented v2 rules. A renamed option or a v1-only habit fails here, not at 3 a.m.

Not run against AWS (nothing here can): what the command returns is the runbook's prose to get right."""

from __future__ import annotations

import re
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name
from stack_template import REPO_ROOT

DOCS = [REPO_ROOT / "docs" / name for name in ("runbook.md", "first-deploy.md", "capacity.md", "operations.md")]
#: The AWS CLI's global options (``aws help``), and ``--cli-binary-format`` (v2).
GLOBAL = {
    "query", "output", "region", "profile", "debug", "endpoint-url", "no-verify-ssl", "no-paginate",
    "no-cli-pager", "cli-binary-format", "cli-input-json", "cli-input-yaml", "max-items", "starting-token",
    "page-size", "color", "no-sign-request", "ca-bundle", "cli-read-timeout", "cli-connect-timeout",
}  # fmt: skip
#: CLI command names that differ from botocore's service names.
SERVICES = {"s3api": "s3"}
#: The high-level ``aws s3`` commands are the CLI's own, not an API's.
CUSTOM = {("s3", "rm"), ("s3", "rb"), ("s3", "cp"), ("s3", "ls")}

_SESSION = botocore.session.get_session()
_COMMAND = re.compile(r"\baws ([a-z0-9-]+) ([a-z][a-z0-9-]+)")


def _options(text: str) -> list[str]:
    """The ``--options`` of the command starting ``text``, up to where it ends: an unquoted ``|``, ``;``,
    ``&&``, backtick, a ``)`` closing the substitution it sits in, or a line end without ``\\``. Quoted values
    and ``$(…)`` substitutions inside the command are skipped (a nested command is checked on its own)."""
    found, depth, quote, i = [], 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif text.startswith("$(", i):
            depth, i = depth + 1, i + 1
        elif c == ")":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and (c in "|;`" or text.startswith("&&", i) or (c == "\n" and text[i - 1] != "\\")):
            break
        elif depth == 0 and text.startswith("--", i) and (i == 0 or text[i - 1] in " \t\n"):
            name = re.match(r"--([a-z0-9-]+)", text[i:])
            if name:
                found.append(name.group(1))
        i += 1
    return found


def commands() -> list[tuple[str, str, str, list[str]]]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for match in _COMMAND.finditer(text):
            service, operation = match.groups()
            line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()]
            if service in ("the",) or line.lstrip().startswith("#"):  # prose, or a shell comment naming it
                continue
            out.append((doc.name, service, operation, _options(text[match.end() :])))
    return out


COMMANDS = commands()


def test_the_documents_have_commands_to_check() -> None:
    assert len(COMMANDS) >= 40


@pytest.mark.parametrize(("doc", "service", "operation", "options"), COMMANDS, ids=lambda v: str(v)[:40])
def test_each_command_is_one_the_cli_accepts(doc: str, service: str, operation: str, options: list[str]) -> None:
    if (service, operation) in CUSTOM:
        return
    model = _SESSION.get_service_model(SERVICES.get(service, service))
    by_cli_name = {xform_name(name, "-"): name for name in model.operation_names}
    assert operation in by_cli_name, f"{doc}: aws {service} {operation}: no such operation"
    shape = model.operation_model(by_cli_name[operation]).input_shape
    members = {xform_name(name, "-"): m for name, m in (shape.members.items() if shape else [])}
    for option in options:
        base = option.removeprefix("no-")
        assert option in GLOBAL or option in members or (base in members and members[base].type_name == "boolean"), (
            f"{doc}: aws {service} {operation} --{option}: not an option of the CLI"
        )
    required = {xform_name(n, "-") for n in (shape.required_members if shape else [])}
    if "cli-input-json" not in options:
        assert required <= set(options), f"{doc}: aws {service} {operation} lacks {sorted(required - set(options))}"
    if (service, operation) == ("lambda", "invoke") and "payload" in options:
        # CLI v2 reads --payload as base64 unless told otherwise ("Invalid base64" on a JSON payload).
        assert "cli-binary-format" in options, f"{doc}: lambda invoke --payload needs --cli-binary-format"


def test_option_scanning_stops_where_a_command_does() -> None:
    text = ' --a 1 --b "$(aws x y --c 2)" | aws z w --d 3'
    assert _options(text) == ["a", "b"]
    assert _options(" --a 'x --not-an-option' \\\n  --b 2\nnext --c") == ["a", "b"]


def test_each_document_is_read(tmp_path: Path) -> None:
    assert {doc for doc, *_ in COMMANDS} >= {"runbook.md", "first-deploy.md"}


#: What the CLI accepts but does not do what an operator means (each seen in this runbook before).
_OR_WITHOUT_FIRST_Q = re.compile(r"""--filter-pattern '"[^"']*" \?""")  # `"a" ?"b"`: AND-ish; OR is `?"a" ?"b"`


def test_the_commands_do_what_an_operator_means() -> None:
    """Beyond the CLI's own rules (CloudWatch Logs' filter syntax, CloudFormation's alarm names, the query
    statuses): a filter's OR form puts ``?`` before each term; ``filter-log-events`` has a ``--start-time`` (it
    scans the group's whole retention otherwise); an alarm is looked up by the name CloudFormation gives it
    (``<stack>-<LogicalId>-<suffix>``: a prefix, never ``--alarm-names <LogicalId>``); a loop over a query's
    status ends on every terminal one."""
    for doc in DOCS:
        text = doc.read_text()
        assert not _OR_WITHOUT_FIRST_Q.search(text), f'{doc.name}: a filter\'s OR form is ?"a" ?"b"'
        for service, operation, options in ((s, o, opts) for d, s, o, opts in COMMANDS if d == doc.name):
            if (service, operation) == ("logs", "filter-log-events"):
                assert "start-time" in options, f"{doc.name}: filter-log-events without --start-time"
        assert "--alarm-names <" not in text, f"{doc.name}: alarms are named <stack>-<LogicalId>-<suffix>"
        assert "= Complete ]" not in text, f"{doc.name}: a query loop must end on Failed, Cancelled and Timeout too"
