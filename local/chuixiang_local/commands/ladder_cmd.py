"""``chuixiang ladder``: the timeout ladder, printed and checked; with ``--account``, the deploy's preflight."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stack_template import REPO_ROOT, Template, parse_overrides

from chuixiang_local.commands.common import common
from chuixiang_local.commands.ladder import build_ladder, markdown_table, reservation_problems


def cmd_ladder(args: argparse.Namespace) -> int:
    overrides = parse_overrides(args.parameter_overrides)
    if args.deployed:
        overrides = _what_deploy_deploys(overrides, _stack_name(args.stack_name))
    template = Template(overrides)
    ladder = build_ladder(template)
    if args.account:
        ladder.problems += _account_problems(template)
        if not args.unpaged:
            ladder.problems += _paging_problems(overrides, _stack_name(args.stack_name))
        ladder.problems += _key_policy_problems(template, _stack_name(args.stack_name))
    if args.deployed or args.account:
        ladder.problems += stack_name_problems(template, _stack_name(args.stack_name))
    if args.account_concurrency is not None:
        ladder.problems += [p for p in reservation_problems(template, args.account_concurrency) if "quota" in p]
    print(markdown_table(template) if args.markdown else ladder.render())
    if not ladder.ok:
        for line in ladder.failures():
            print(f"error: {line}", file=sys.stderr)
        return 2
    return 0


#: EventBridge Scheduler's limit on a schedule's name (the canary's is "<stack>-canary").
SCHEDULE_NAME_MAX = 64


def schedule_names(template: Template, stack_name: str) -> list[str]:
    """The names of the schedules this deployment creates (SAM's ``ScheduleV2`` events of the functions that
    exist with these parameters), for ``stack_name``."""
    names = []
    for resource in template.deployed("AWS::Serverless::Function").values():
        for event in resource["Properties"].get("Events", {}).values():
            named = event["Properties"].get("Name", {}) if event["Type"] == "ScheduleV2" else {}
            if isinstance(named, dict) and "Fn::Sub" in named:
                names.append(named["Fn::Sub"].replace("${AWS::StackName}", stack_name))
    return names


def stack_name_problems(template: Template, stack_name: str) -> list[str]:
    """Names the stack derives that AWS bounds: its schedules' (``<stack>-canary``, ``<stack>-synthetic``)."""
    return [
        f"a schedule would be named {name!r} ({len(name)} characters): EventBridge Scheduler takes at most "
        f"{SCHEDULE_NAME_MAX}; use a stack name of at most {SCHEDULE_NAME_MAX - len(name) + len(stack_name)} characters"
        for name in schedule_names(template, stack_name)
        if len(name) > SCHEDULE_NAME_MAX
    ]


def _stack_name(given: str | None) -> str:
    from chuixiang_local.commands.deploy_parameters import samconfig_stack_name

    return given or samconfig_stack_name(REPO_ROOT / "samconfig.toml") or "chuixiang"


def _what_deploy_deploys(command_line: dict[str, str], name: str) -> dict[str, str]:
    """The deployed stack's values, then the command line's overrides, or else samconfig.toml's (as ``sam deploy``)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from chuixiang_local.commands.deploy_parameters import deployed_parameters, samconfig_overrides, what_sam_deploys

    samconfig = REPO_ROOT / "samconfig.toml"
    try:
        previous = deployed_parameters(boto3.client("cloudformation"), name)
        print(
            f"checking stack {name}: {len(previous)} deployed parameter values kept unless overridden", file=sys.stderr
        )
    except (BotoCoreError, ClientError) as exc:
        print(
            f"note: stack {name}'s deployed parameters could not be read ({exc}); checking samconfig.toml "
            f"and the command line over the template's defaults",
            file=sys.stderr,
        )
        previous = {}
    return what_sam_deploys(previous, samconfig_overrides(samconfig), command_line)


def _account_problems(template: Template) -> list[str]:
    """The reservation against the account's quota, read with the caller's credentials (a deploy has them)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from chuixiang_local.commands.ladder import account_concurrency

    try:
        limit, reserved = account_concurrency(boto3.client("lambda"))
    except (BotoCoreError, ClientError) as exc:
        print(
            f"note: the account's concurrency quota could not be read ({exc}); reservation not checked against it",
            file=sys.stderr,
        )
        return []
    own = [p for p in reservation_problems(template, limit, reserved) if "quota" in p]
    print(f"account: concurrency quota {limit}, {reserved} already reserved", file=sys.stderr)
    return own


#: Each customer-managed key parameter, and the roles (logical ids) of the functions that read the secret under it.
SECRET_READERS = {
    "ModelApiKeyKmsKeyArn": ("RecipeFunctionRole", "ImageFunctionRole", "CanaryFunctionRole"),
    "SyntheticTokenKmsKeyArn": ("SyntheticFunctionRole",),
}


def _key_policy_problems(template: Template, stack_name: str) -> list[str]:
    """With a secret under a customer-managed key: whether the key's policy lets the readers' roles decrypt it
    (read with the caller's credentials; the roles from the stack once it exists)."""
    problems: list[str] = []
    for parameter, readers in SECRET_READERS.items():
        key = template.parameters.get(parameter, "")
        if key:
            problems += _one_key_problems(key, readers, stack_name)
    return problems


def _one_key_problems(key: str, readers: tuple[str, ...], stack_name: str) -> list[str]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from chuixiang_local.commands.key_policy import key_policy_problems

    partition = key.split(":")[1]
    try:
        policy = boto3.client("kms").get_key_policy(KeyId=key, PolicyName="default")["Policy"]
        account = boto3.client("sts").get_caller_identity()["Account"]
        roles = stack_role_arns(boto3.client("cloudformation"), stack_name, partition, account, readers)
    except (BotoCoreError, ClientError) as exc:
        print(f"note: the key policy of {key} could not be read ({exc}); not checked", file=sys.stderr)
        return []
    return key_policy_problems(policy, key, account, partition, roles)


def stack_role_arns(
    cloudformation: Any,
    stack_name: str,
    partition: str,
    account: str,
    readers: tuple[str, ...] = SECRET_READERS["ModelApiKeyKmsKeyArn"],
) -> list[str]:
    """The readers' role ARNs in the deployed stack (none before its first deploy)."""
    from botocore.exceptions import ClientError

    try:
        resources = cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]
    except ClientError:  # no stack yet (ValidationError): the check says what the first deploy needs
        return []
    return [
        f"arn:{partition}:iam::{account}:role/{r['PhysicalResourceId']}"
        for r in resources
        if r["LogicalResourceId"] in readers
    ]


def _paging_problems(parameters: dict[str, str], stack_name: str) -> list[str]:
    """Whether the stack's alarms would reach anyone: the deploy's parameters, else the topic's confirmed
    subscribers (read with the caller's credentials; unreadable is a note, as for the quota)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from chuixiang_local.commands.paging import confirmed_subscriptions, deployed_topic, paging_problems

    try:
        topic = deployed_topic(boto3.client("cloudformation"), stack_name)
        subscribed = confirmed_subscriptions(boto3.client("sns"), topic) if topic else []
    except (BotoCoreError, ClientError) as exc:
        print(f"note: stack {stack_name}'s alarm topic could not be read ({exc}); paging not checked", file=sys.stderr)
        return []
    print(f"alarms: {len(subscribed)} confirmed subscriber(s) on {topic or 'no topic yet'}", file=sys.stderr)
    return paging_problems(parameters, subscribed)


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser("ladder", help="print and check the timeout ladder")
    p.add_argument("--markdown", action="store_true", help="print the ladder as docs/ladder.md's table")
    p.add_argument(
        "--account",
        action="store_true",
        help="also check the reservation, the admitted jobs and the API's peak against the AWS account's "
        "concurrency quota, and that the alarms would page someone (read with your credentials)",
    )
    p.add_argument(
        "--unpaged",
        action="store_true",
        help="with --account: accept a stack whose alarms reach nobody (no AlarmEmail, no AlarmHttpsEndpoint, "
        "no confirmed subscriber on its topic)",
    )
    p.add_argument(
        "--account-concurrency",
        type=int,
        metavar="N",
        help="the same check against a quota of N, without AWS (a new account may have 10)",
    )
    p.add_argument(
        "--deployed",
        action="store_true",
        help="check what `sam deploy` will deploy: the stack's current values, then --parameter-overrides "
        "(which replace samconfig.toml's parameter_overrides, as in sam deploy) or else samconfig.toml's",
    )
    p.add_argument("--stack-name", help="with --deployed or --account (default: samconfig.toml's stack_name)")
    common(p, model=False)
    p.set_defaults(func=cmd_ladder)
