"""Every command ``docs/runbook.md`` tells an operator to run, run: by the real AWS CLI (the ``awscli`` package,
``.venv-cli``), after the runbook's own set-up block, against the local cloud's moto holding the stack as
CloudFormation names it (``<stack>-<LogicalId>-<suffix>``, the outputs, the schedules, the functions'
log group with the functions' own lines). Its filter patterns are run over those lines
(:mod:`chuixiang_local.logs_filter`), and each ``--alarm-name-prefix`` is matched against the alarms' names
(each ``AlarmName`` is ``<stack>-<LogicalId>``, the nested template's alarms named after the app's stack).

What moto does not answer (composite alarms, CloudTrail, query definitions, invoking a function, cancelling an
update, a state machine's alias) is sent to a stub that answers every call with an empty success: the CLI has
parsed the command, validated its parameters against the service model, and built the request; what comes
back is the runbook's prose to get right. PyPI's CLI is version 1; the runbook's ``--cli-binary-format
raw-in-base64-out`` is version 2's switch to what version 1 always does, so our ``aws`` drops it
(``tests/unit/test_doc_commands.py`` holds the option to version 2's rules). Our ``aws`` hands each command to the
CLI imported once and forked per command (``tests/support/aws_cli_server.py``): its code on the same arguments, in
the caller's directory, environment and standard streams, without ~0.4 s of imports a call."""

from __future__ import annotations

import http.server
import json
import os
import random
import re
import string
import subprocess  # nosec B404  # the AWS CLI and bash, on the runbook's own commands
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer
from stack_template import REPO_ROOT, Template

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.logs_filter import matcher
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import SCALED, WHOLE
from ..support.waiting import wait_until

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

RUNBOOK = REPO_ROOT / "docs" / "runbook.md"
CLI_PYTHON = REPO_ROOT / ".venv-cli" / "bin" / "python"
HANG = Path(__file__).parents[1] / "lambdas" / "hang"
REGION, ACCOUNT = "us-east-1", "123456789012"
#: What moto does not implement, by ``service operation``: the stub answers these.
STUBBED = {
    "cloudwatch describe-alarms",  # the runbook's describe-alarms ask for composite alarms, which moto lacks
    "cloudtrail lookup-events",
    "logs describe-query-definitions",
    "logs start-query",
    "logs get-query-results",
    "lambda invoke",  # moto's needs Docker; the local cloud runs functions in its own workers
    "lambda get-account-settings",  # moto's server does not route its path
    "cloudformation cancel-update-stack",
    "stepfunctions update-state-machine-alias",
}
#: The operator's own choices, which no stack holds.
CHOICES = {"<n-1>": "1", "<previous version arn>": "$SM:1"}

#: ``aws`` is the CLI's own code, imported once and forked per command (tests/support/aws_cli_server.py).
AWS_SERVER = Path(__file__).parents[1] / "support" / "aws_cli_server.py"
AWS_CLIENT = Path(__file__).parents[1] / "support" / "aws_cli_client.py"


@dataclass(frozen=True)
class Command:
    line: int
    text: str  #: a shell command, or a fenced block
    section: str  #: the heading it is under: a variable one command sets, the next of the section uses


def runbook_commands() -> tuple[str, list[Command]]:
    """The set-up block, then every other fenced block and every inline span that runs ``aws``."""
    text = RUNBOOK.read_text()
    blocks = [(m.start(), m.group(1)) for m in re.finditer(r"```sh\n(.*?)```", text, re.S)]
    setup = blocks[0][1]
    headings = [(text.count("\n", 0, m.start()) + 1, m.group(0)) for m in re.finditer(r"^#+ .*$", text, re.M)]

    def section(line: int) -> str:
        return max(((at, h) for at, h in headings if at < line), default=(0, ""))[1]

    found = []
    for at, body in blocks[1:]:
        line = text.count("\n", 0, at) + 1
        found.append(Command(line, textwrap.dedent(body).rstrip(), section(line)))
    prose = re.sub(r"```sh\n.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for match in re.finditer(r"`([^`]*\baws [a-z0-9-]+ [a-z0-9-]+[^`]*|[A-Z]+=\$\((?:fn|out) \w+\))`", prose):
        line = prose.count("\n", 0, match.start()) + 1
        found.append(Command(line, " ".join(match.group(1).split()), section(line)))
    return setup, sorted(found, key=lambda c: c.line)


SETUP, COMMANDS = runbook_commands()
STACK = re.search(r"^STACK=(\S+)", SETUP, re.M).group(1)  # type: ignore[union-attr]


def test_the_runbook_has_its_commands() -> None:
    assert len(COMMANDS) >= 20 and "fn()" in SETUP and "out()" in SETUP


# --- the functions' own lines ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def function_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A served job, a model that fails, a recipe function killed at its Timeout and a synthetic run that cannot
    reach the API: the lines the functions (and Lambda, for the timeout) write to their log group."""
    work = tmp_path_factory.mktemp("runbook")
    with (
        FakeModel(pace_s=0.001) as fake,
        open(work / "functions.log", "w") as log,
        LocalCloud(
            {**SCALED, **WHOLE, "CanaryModels": "glm-4-flash"}, model_base_url=fake.base_url, work_dir=work, log=log
        ) as cloud,
    ):
        api = LocalApi(cloud)
        assert api.wait(api.post_dish("照着手册的菜")[1]["jobId"], give_up_s=30)["status"] == "SUCCEEDED"
        fake.chat_by_model[cloud.template.parameters["RecipeModel"]] = ChatBehaviour(status=503)
        assert api.wait(api.post_dish("模型坏了的菜")[1]["jobId"], give_up_s=30)["status"] == "FAILED"
        recipe = cloud.functions["RecipeFunction"]
        saved, recipe.code_dir = recipe.code_dir, HANG
        try:
            api.wait(api.post_dish("卡住的菜")[1]["jobId"], give_up_s=30)
        finally:
            recipe.code_dir = saved
        cloud.api_url = "http://127.0.0.1:9"  # nothing listens: the run is an api_error, logged as a synthetic job
        cloud.invoke(cloud.functions["SyntheticFunction"], {})
        wait_until(lambda: not cloud.running_executions(), timeout_s=40, what="every execution ended")
        # The api function's ERROR line: a job it cannot start (the state machine gone).
        cloud.client("stepfunctions").delete_state_machine(stateMachineArn=cloud.state_machine_arn)
        status, _ = api.post_dish("起不来的菜")
        assert status >= 500
    return [line for line in (work / "functions.log").read_text().splitlines() if not line.startswith("===")]


# --- the stack as deployed, and the endpoints ------------------------------------------------------------


class _Stub(http.server.BaseHTTPRequestHandler):
    """An empty success for any call: ``{}`` for the JSON protocols, an empty result for the query (XML) ones."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode(errors="replace")
        json_protocol = "X-Amz-Target" in self.headers or self.path.startswith("/2015-03-31/")
        if json_protocol:
            payload, kind = b"{}", "application/x-amz-json-1.1"
        else:
            action = re.search(r"Action=(\w+)", body)
            name = action.group(1) if action else "Unknown"
            payload = f"<{name}Response><{name}Result/></{name}Response>".encode()
            kind = "text/xml"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_PUT = do_POST

    def log_message(self, *args: Any) -> None:
        pass


@dataclass(frozen=True)
class Deployed:
    env: dict[str, str]
    calls: Path
    alarms: list[str]  #: every alarm's name, as its AlarmName names it


def _cfn_suffix(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(12))


def _stack(moto: str, lines: list[str]) -> list[str]:
    """The runbook's stack in moto: what CloudFormation creates in moto as it would (queues, topics, the log
    group, functions, the table, the state machine, the outputs), then what moto's CloudFormation cannot
    create, named as the template names them (alarms, schedules)."""
    template, rng = Template(), random.Random(7)  # nosec B311  # names, not secrets
    kw: dict[str, Any] = {
        "endpoint_url": moto,
        "region_name": REGION,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",  # nosec B106  # moto
    }
    trust = {"Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:*"}]}
    role = boto3.client("iam", **kw).create_role(RoleName="runbook", AssumeRolePolicyDocument=json.dumps(trust))
    role_arn = role["Role"]["Arn"]
    function = {"Runtime": "python3.12", "Handler": "app.h", "Role": role_arn, "Code": {"ZipFile": "h = print"}}
    machine = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    resources: dict[str, Any] = {
        "ReconcileDeadLetterQueue": {"Type": "AWS::SQS::Queue"},
        "AlarmTopic": {"Type": "AWS::SNS::Topic"},
        "TicketTopic": {"Type": "AWS::SNS::Topic"},
        "FunctionLogGroup": {
            "Type": "AWS::Logs::LogGroup",
            "Properties": {"LogGroupName": f"/aws/lambda/{STACK}-functions"},
        },
        "JobsTable": {
            "Type": "AWS::DynamoDB::Table",
            "Properties": {
                "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        },
        **{
            name: {"Type": "AWS::Lambda::Function", "Properties": function}
            for name in ("ApiFunction", "RecipeFunction", "ReconcileFunction", "CanaryFunction", "SyntheticFunction")
        },
    }
    # moto's CloudFormation gives a state machine an ARN it does not create: made through the API, named so.
    state_machine = boto3.client("stepfunctions", **kw).create_state_machine(
        name=f"{STACK}-RecipeStateMachine-{_cfn_suffix(rng)}", definition=machine, roleArn=role_arn
    )["stateMachineArn"]
    outputs = {
        "StateMachineArn": {"Value": state_machine},
        "JobsTableName": {"Value": {"Ref": "JobsTable"}},
        "AlarmTopicArn": {"Value": {"Ref": "AlarmTopic"}},
        "TicketTopicArn": {"Value": {"Ref": "TicketTopic"}},
    }
    assert set(outputs) <= set(template.doc["Outputs"]) and set(resources) <= set(template.doc["Resources"])
    cfn = boto3.client("cloudformation", **kw)
    cfn.create_stack(StackName=STACK, TemplateBody=json.dumps({"Resources": resources, "Outputs": outputs}))
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cfn.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
    }
    lam = boto3.client("lambda", **kw)
    for name in ("RecipeFunction", "ReconcileFunction", "CanaryFunction", "SyntheticFunction"):
        version = lam.publish_version(FunctionName=physical[name])["Version"]
        lam.create_alias(FunctionName=physical[name], Name="live", FunctionVersion=version)
        lam.publish_version(FunctionName=physical[name], Description="the next deploy")
    scheduler = boto3.client("scheduler", **kw)
    for suffix in ("canary", "synthetic"):
        scheduler.create_schedule(
            Name=f"{STACK}-{suffix}",
            ScheduleExpression="rate(1 hour)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={
                "Arn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{physical['CanaryFunction']}",
                "RoleArn": role_arn,
            },
        )
    logs, now = boto3.client("logs", **kw), int(time.time() * 1000)
    logs.create_log_stream(logGroupName=f"/aws/lambda/{STACK}-functions", logStreamName="2026/12/04/[$LATEST]runbook")
    logs.put_log_events(
        logGroupName=f"/aws/lambda/{STACK}-functions",
        logStreamName="2026/12/04/[$LATEST]runbook",
        logEvents=[{"timestamp": now - 60_000 + i, "message": line} for i, line in enumerate(lines) if line.strip()],
    )
    alarms = [
        f"{STACK}-{lid}"
        for lid, r in template.doc["Resources"].items()
        if r["Type"] in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
    ]
    return alarms


@pytest.fixture(scope="module")
def deployed(function_lines: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    if not CLI_PYTHON.exists():
        pytest.fail("the AWS CLI is not installed: `make test` (or `make .venv-cli/.installed-*`) installs it")
    work = tmp_path_factory.mktemp("cli")
    moto_server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto_server.start()
    cli: subprocess.Popen[str] | None = None
    stub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    try:
        host, port = moto_server.get_host_and_port()
        moto = f"http://{host}:{port}"
        alarms = _stack(moto, function_lines)
        bin_dir = work / "bin"
        bin_dir.mkdir()
        (bin_dir / "aws").write_text(f"#!{CLI_PYTHON} -IS\n{AWS_CLIENT.read_text()}")
        (bin_dir / "aws").chmod(0o755)
        cli = _aws_server(work / "aws.sock")
        calls = work / "calls.jsonl"
        env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "HOME": str(work),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",  # nosec B105  # moto
            "AWS_DEFAULT_REGION": REGION,
            "AWS_MAX_ATTEMPTS": "1",
            "AWS_PAGER": "",
            "RUNBOOK_MOTO": moto,
            "RUNBOOK_STUB": f"http://127.0.0.1:{stub.server_address[1]}",
            "RUNBOOK_STUBBED": json.dumps(sorted(STUBBED)),
            "RUNBOOK_CALLS": str(calls),
            "TMPDIR": str(work),
            "RUNBOOK_AWS_SERVER": str(work / "aws.sock"),
        }
        yield Deployed(env, calls, alarms)
    finally:
        if cli is not None:
            cli.kill()
            cli.wait()
        stub.shutdown()
        moto_server.stop()


def _aws_server(path: Path) -> subprocess.Popen[str]:
    """The CLI's fork server, listening on ``path`` once it says so."""
    server = subprocess.Popen(  # nosec B603  # our own script, by the CLI's venv
        [str(CLI_PYTHON), str(AWS_SERVER), str(path)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None and server.stdout.readline().strip() == "ready", "the AWS CLI server did not start"
    return server


def _run(deployed: Deployed, command: str, before: str = "", setup: str = SETUP) -> subprocess.CompletedProcess[str]:
    for placeholder, value in CHOICES.items():
        command = command.replace(placeholder, value)
    script = f"{setup}\nset -e -o pipefail\n{before}\n{command}\n"
    return subprocess.run(  # nosec B603 B607  # bash on the runbook's commands
        ["bash", "-c", script], env=deployed.env, capture_output=True, text=True, timeout=60, cwd=deployed.calls.parent
    )


@pytest.fixture(scope="module")
def results(deployed: Deployed) -> dict[int, subprocess.CompletedProcess[str]]:
    """Each command run once, in the runbook's order, after the assignments made earlier in its section."""
    done: dict[int, subprocess.CompletedProcess[str]] = {}
    assignments: dict[str, list[str]] = {}
    # The set-up block once, as written (each of its calls answered); then its variables and functions as it left
    # them, so each command does not ask the stack for its outputs again.
    made = _run(deployed, "declare -p STACK SM TABLE LOGS; declare -f fn out")
    assert made.returncode == 0 and not made.stderr.strip() and "arn:aws:states" in made.stdout, made.stderr
    setup = made.stdout
    execution = _run(
        deployed,
        'aws stepfunctions start-execution --state-machine-arn $SM --input "{}" --query executionArn --output text',
        setup=setup,
    )
    assert execution.returncode == 0, execution.stderr
    for command in COMMANDS:
        text = command.text.replace("--execution-arn <arn>", f"--execution-arn {execution.stdout.strip()}")
        done[command.line] = _run(deployed, text, "\n".join(assignments.get(command.section, [])), setup)
        if re.fullmatch(r"[A-Z]+=\$\(.*\)", command.text):
            assignments.setdefault(command.section, []).append(command.text)
    return done


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"line{c.line}")
def test_each_command_runs(results: dict[int, subprocess.CompletedProcess[str]], command: Command) -> None:
    """Exit 0 and nothing on stderr: the CLI took every option and value, each name resolved in the stack as
    deployed, and each call the local cloud can answer was answered."""
    done = results[command.line]
    assert done.returncode == 0 and not done.stderr.strip(), f"line {command.line}: {command.text}\n{done.stderr}"
    unfilled = re.findall(r"<[a-z][^>]*>", command.text.replace("<arn>", ""))
    assert all(p in CHOICES for p in unfilled), f"line {command.line}: a placeholder nothing fills: {unfilled}"


def test_every_call_is_answered_by_the_local_cloud_unless_it_cannot(
    deployed: Deployed, results: dict[int, subprocess.CompletedProcess[str]]
) -> None:
    calls = [json.loads(line) for line in deployed.calls.read_text().splitlines()]
    made = {call for call, _ in calls}
    answered = {call for call, stubbed in calls if not stubbed}
    assert made >= STUBBED, STUBBED - made  # each stub stands in for a call the runbook makes
    assert answered >= {
        "cloudformation describe-stacks",
        "cloudformation describe-stack-resource",
        "logs filter-log-events",
        "sns list-subscriptions-by-topic",
        "sqs get-queue-attributes",
        "sqs receive-message",
        "scheduler get-schedule",
        "stepfunctions list-executions",
        "stepfunctions get-execution-history",
        "lambda update-alias",
        "lambda list-versions-by-function",
    }, answered


# --- what the commands find ---------------------------------------------------------------------------------


def _patterns() -> list[str]:
    return [m.group(1) for c in COMMANDS for m in re.finditer(r"--filter-pattern '([^']*)'", c.text)]


def test_each_filter_pattern_finds_the_lines_it_is_for(function_lines: list[str]) -> None:
    """Run over the functions' own lines: a filter that finds nothing at 3 a.m. is a wrong filter."""
    patterns = _patterns()
    assert len(patterns) >= 4
    found = {p: [line for line in function_lines if matcher(p)(line)] for p in patterns}
    for pattern, lines in found.items():
        assert lines, f"{pattern!r} finds none of the functions' lines"
    timeouts = [line for line in function_lines if "Task timed out after" in line]
    assert timeouts, "Lambda's own timeout line is in the log group"
    assert all(line in found['?"Task timed out" ?"ERROR"'] for line in timeouts)
    assert all('"synthetic job"' in line for line in found['{ $.message = "synthetic job" }'])


def test_each_json_filter_names_fields_the_functions_log() -> None:
    """A JSON pattern on a field no function writes matches nothing, silently: each selector is a field of the
    functions' Powertools lines, and ``*Api*`` is the api function's name as deployed."""
    fields = {"message", "level", "function_name", "location", "service", "timestamp"}
    for pattern in _patterns():
        for selector in re.findall(r"\$\.([\w.]+)", pattern):
            assert selector.split(".")[0] in fields, (pattern, selector)
    api = json.dumps({"function_name": f"{STACK}-ApiFunction-{'A' * 12}", "level": "ERROR"})
    assert matcher('{ $.function_name = "*Api*" && $.level = "ERROR" }')(api)


def test_each_alarm_name_prefix_finds_its_alarms_as_cloudformation_names_them(deployed: Deployed) -> None:
    """Each alarm's ``AlarmName`` is ``<stack>-<LogicalId>`` (``tests/runner/test_nested_template.py``): a prefix of
    the stack and a logical id finds it (and the composite the runbook asks for is one)."""
    for command in COMMANDS:
        for prefix in re.findall(r"--alarm-name-prefix \$STACK-(\w+)", command.text):
            hits = [a for a in deployed.alarms if a.startswith(f"{STACK}-{prefix}")]
            assert hits, f"line {command.line}: no alarm is named {STACK}-{prefix}…"
            if "CompositeAlarm" in command.text:
                composites = {
                    lid
                    for lid, r in Template().doc["Resources"].items()
                    if r["Type"] == "AWS::CloudWatch::CompositeAlarm"
                }
                assert [h for h in hits if h.split("-")[1] in composites] == hits[:1] == hits, hits
