"""What `make deploy` checks before it deploys: reserved concurrency against admission and the account's
quota (as Lambda reads and enforces it), the ladder with the values that will be deployed, the CLI installed
first, a stack name the schedules cannot carry refused, and the peak the first-deploy page states."""

from __future__ import annotations

import re
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from stack_template import ConfigError, Template

from chuixiang_local.commands.ladder import account_concurrency, build_ladder, reservation_problems

from ..support.serve import ROOT
from ..support.template_doc import DOC, RESOURCES


def test_reserved_concurrency_is_optional() -> None:
    assert DOC["Parameters"]["RecipeReservedConcurrency"]["Default"] == 0
    assert DOC["Conditions"]["HasReservedConcurrency"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "RecipeReservedConcurrency"}, 0]}]
    }
    for name in ("RecipeFunction", "ImageFunction"):
        assert RESOURCES[name]["Properties"]["ReservedConcurrentExecutions"] == {
            "Fn::If": ["HasReservedConcurrency", {"Ref": "RecipeReservedConcurrency"}, {"Ref": "AWS::NoValue"}]
        }
    # The API still admits no more jobs than RecipeConcurrency, reserved or not.
    assert RESOURCES["ApiFunction"]["Properties"]["Environment"]["Variables"]["ADMISSION_SLOTS"] == {
        "Ref": "RecipeConcurrency"
    }


def test_reserved_concurrency_is_checked_against_admission_and_the_account_quota() -> None:
    assert reservation_problems(Template()) == []  # none reserved: nothing to check
    whole = {"RecipeSections": "whole", "RecipeConcurrency": "20"}
    assert build_ladder(Template({"RecipeReservedConcurrency": "20", **whole})).ok
    below = build_ladder(Template({"RecipeReservedConcurrency": "5", **whole}))
    assert not below.ok and any("below the 20 jobs admission lets run" in f for f in below.failures())
    # Admission counts jobs in every mode (a job in sections borrows its extra streams from the key, not from
    # admission): 100 jobs by default, which 100 reserved hold and 9 do not; the key's stated quota caps them.
    assert build_ladder(Template({"RecipeReservedConcurrency": "100", "RecipeSections": "parallel"})).ok
    assert not build_ladder(Template({"RecipeReservedConcurrency": "9", "RecipeSections": "parallel"})).ok
    assert build_ladder(Template({"RecipeReservedConcurrency": "9", "RecipeKeyStreams": "9"})).ok
    new_account = reservation_problems(Template({"RecipeReservedConcurrency": "20", **whole}), account_limit=50)
    assert len(new_account) == 2 and "leaves 10 of the account's concurrency quota 50" in new_account[0]
    assert "cannot hold 32 at the peak" in new_account[1]  # the API's peak alone: (20 + 300)/s x 0.1 s
    twenty = Template({"RecipeReservedConcurrency": "20", **whole})
    assert reservation_problems(twenty, 1000, already_reserved=870) != []  # 90 left unreserved
    assert reservation_problems(twenty, 1000, already_reserved=860) == []  # 100 left
    # Unreserved, the quota holds the admitted jobs and the API's peak together: 100 + 32 on the defaults.
    assert reservation_problems(Template(), 132) == [] and len(reservation_problems(Template(), 131)) == 1
    assert "cannot hold 132 at the peak: 100 admitted jobs" in reservation_problems(Template(), 10)[0]


def test_the_account_quota_throttles_as_lambda_does() -> None:
    from chuixiang_local.cloud.concurrency import AccountConcurrency

    account = AccountConcurrency(quota=200, reserved={"recipe": 50}, outside=lambda: 30)
    assert [account.acquire("recipe") for _ in range(51)].count(True) == 50  # its reservation, no more
    assert [account.acquire("submit") for _ in range(121)].count(True) == 120  # 150 unreserved, 30 for the api
    assert account.throttles == {"recipe": 1, "submit": 1}
    account.release("submit")
    assert account.acquire("image")  # one freed: the unreserved pool is shared
    with pytest.raises(ConfigError, match="minimum value"):
        AccountConcurrency(quota=10, reserved={"recipe": 1})  # a new account cannot reserve at all


def test_the_account_quota_is_read_as_lambda_reports_it() -> None:
    client = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response(
            "get_account_settings",
            {
                "AccountLimit": {
                    "TotalCodeSize": 80530636800,
                    "CodeSizeUnzipped": 262144000,
                    "CodeSizeZipped": 52428800,
                    "ConcurrentExecutions": 10,
                    "UnreservedConcurrentExecutions": 10,
                },
                "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
            },
        )
        assert account_concurrency(client) == (10, 0)


def test_make_deploy_installs_the_cli_before_running_it() -> None:
    deploy = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("deploy:"))
    assert "$(STAMP)" in deploy.split(":", 1)[1]  # the ladder runs .venv/bin/chuixiang
    recipe = (ROOT / "Makefile").read_text().split("\ndeploy:", 1)[1]
    assert "chuixiang ladder --account --deployed" in recipe


def test_the_ladder_before_a_deploy_checks_what_will_be_deployed(tmp_path: Path) -> None:
    """``sam deploy`` keeps the stack's previous values, then applies the command line's overrides, which
    *replace* samconfig.toml's (else samconfig.toml's): a stale 120 s function Timeout kept from an old deploy
    (under today's 140 s total) must break the check even though the defaults are fine."""
    from chuixiang_local.commands.deploy_parameters import MASKED, effective_overrides, samconfig_stack_name

    cfn = boto3.client("cloudformation", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    samconfig = tmp_path / "samconfig.toml"
    samconfig.write_text(
        'version = 0.1\n[default.global.parameters]\nstack_name = "chuixiang-prod"\n'
        '[default.deploy.parameters]\nparameter_overrides = "RecipeIdleTimeoutMs=25000"\n'
    )
    assert samconfig_stack_name(samconfig) == "chuixiang-prod"
    previous = [
        {"ParameterKey": "RecipeFunctionTimeout", "ParameterValue": "120"},
        {"ParameterKey": "RecipeIdleTimeoutMs", "ParameterValue": "30000"},
        {"ParameterKey": "ModelApiKeySecretArn", "ParameterValue": MASKED},
    ]
    stack = {
        "StackName": "chuixiang-prod",
        "CreationTime": "2026-01-01T00:00:00Z",
        "StackStatus": "UPDATE_COMPLETE",
        "Parameters": previous,
    }
    with Stubber(cfn) as stub:
        stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "chuixiang-prod"})
        effective = effective_overrides(cfn, "chuixiang-prod", samconfig, {"ProgressIntervalMs": "1000"})
    # samconfig.toml's RecipeIdleTimeoutMs=25000 is not sent: the command line replaced its overrides whole.
    assert effective == {"RecipeFunctionTimeout": "120", "RecipeIdleTimeoutMs": "30000", "ProgressIntervalMs": "1000"}
    stale = build_ladder(Template(effective))
    assert not stale.ok and build_ladder(Template({"RecipeIdleTimeoutMs": "25000", "ProgressIntervalMs": "1000"})).ok
    with Stubber(cfn) as stub:  # no command line: samconfig.toml's overrides
        stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": "chuixiang-prod"})
        from_file = effective_overrides(cfn, "chuixiang-prod", samconfig, {})
    assert from_file == {"RecipeFunctionTimeout": "120", "RecipeIdleTimeoutMs": "25000"}
    with Stubber(cfn) as stub:  # a first deploy: no stack yet
        stub.add_client_error("describe_stacks", "ValidationError", "Stack with id chuixiang-prod does not exist")
        assert effective_overrides(cfn, "chuixiang-prod", samconfig, {}) == {"RecipeIdleTimeoutMs": "25000"}


def test_first_deploy_states_the_peak_the_ladder_computes() -> None:
    """docs/first-deploy.md's figures are the ladder's on the template's defaults."""

    from stack_template import REPO_ROOT

    said = reservation_problems(Template(), 10)[0]
    peak, admitted = re.search(r"cannot hold (\d+) at the peak: (\d+) admitted jobs", said).groups()  # type: ignore[union-attr]
    doc = " ".join((REPO_ROOT / "docs" / "first-deploy.md").read_text().split())
    assert f"the peak needs {peak} concurrent Lambda executions: {admitted} admitted jobs" in doc
    assert f"`RecipeConcurrency` {int(Template().number('RecipeConcurrency'))} jobs at once" in doc


def test_a_stack_name_the_schedules_cannot_carry_is_refused_before_the_deploy() -> None:
    from chuixiang_local.commands.ladder_cmd import schedule_names, stack_name_problems

    canary = Template({"CanaryModels": "m"})
    assert schedule_names(canary, "s") == ["s-canary", "s-synthetic"]
    assert stack_name_problems(canary, "c" * 54) == []  # 54 + "-synthetic" = 64
    assert "at most 54" in stack_name_problems(canary, "c" * 55)[0]  # the synthetic job's; the canary's fits
    only_canary = Template({"CanaryModels": "m", "SyntheticSchedule": ""})
    assert schedule_names(only_canary, "s") == ["s-canary"] and stack_name_problems(only_canary, "c" * 57) == []
    assert "at most 57" in stack_name_problems(only_canary, "c" * 58)[0]
    assert stack_name_problems(Template(), "c" * 80) == []  # no canary, no schedule
