"""What would break the first deploy to a real account, or production after it: each item of that review
checked here as far as it can be without AWS (the template, the ASL, the Makefile, the CLI)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import httpx
import pytest
from stack_template import Template

from chuixiang_local.cloud import sam
from chuixiang_local.cloud.local_cloud import environment_before_activation
from chuixiang_local.gateway.api_client import LocalApi

from ..support.commands import run_cli
from ..support.scaled import ONE_CALLER, WHOLE
from ..support.serve import ROOT, Serve, free_port
from ..support.template_doc import walk
from ..support.waiting import wait_until

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions.type_defs import ExecutionListItemTypeDef

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

# --- would break the deploy ------------------------------------------------------------------------


def test_ladder_account_check_says_when_it_cannot_read_the_quota() -> None:
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: the call fails at once, on loopback
    env = {
        **environment_before_activation(),
        "AWS_ENDPOINT_URL": closed,
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
    }
    done = run_cli("ladder", "--account", "--parameter-overrides", "RecipeReservedConcurrency=100", env=env)
    assert done.returncode == 0, done.stderr
    assert "could not be read" in done.stderr


# --- would break in production ---------------------------------------------------------------------


@pytest.mark.parametrize("body", ['{"dish": ' + "9" * 5000 + "}", '{"dish": "番茄炒蛋", "n": -' + "1" * 4400 + "}"])
def test_an_integer_of_more_than_4300_digits_is_a_400(body: str, api: LocalApi) -> None:
    status, doc = api.request("POST", "/recipes", body)
    assert status == 400 and doc["error"]["code"] == "INVALID_DISH" and "4300" in doc["error"]["reason"], doc


# --- operations --------------------------------------------------------------------------------------


def test_a_browser_preflight_gets_the_configured_origins_and_never_needs_a_token() -> None:
    """Through ``chuixiang serve`` with CorsAllowOrigins set and the JWT authorizer on: OPTIONS on both routes
    answers 204 with the CORS headers for an allowed origin and none for another; HEAD on a job answers as
    GET without a body; the refusals the gate makes carry the CORS headers too."""
    origins = "https://servicewechat.com,https://admin.example.cn"
    overrides = {"CorsAllowOrigins": origins, "JwtIssuer": "https://login.example.cn", "JwtAudience": "mini"}
    with Serve(overrides) as serve:
        for path in ("/recipes", "/recipes/0badc0de-0000-4000-8000-000000000009"):
            ok = httpx.options(
                f"{serve.base}{path}",
                timeout=30,
                headers={
                    "Origin": "https://servicewechat.com",
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type,authorization",
                },
            )
            assert ok.status_code == 204, (path, ok.status_code, ok.text)
            assert ok.headers["access-control-allow-origin"] == "https://servicewechat.com"
            assert "POST" in ok.headers["access-control-allow-methods"]
            assert "authorization" in ok.headers["access-control-allow-headers"].lower()
            other = serve.http.options(f"{serve.base}{path}", timeout=30, headers={"Origin": "https://evil.example"})
            assert other.status_code == 204 and "access-control-allow-origin" not in other.headers
        # Everything else still needs the token.
        assert serve.http.post(f"{serve.base}/recipes", json={"dish": "x"}, timeout=30).status_code == 401


def test_head_on_a_job_answers_like_get_without_a_body() -> None:
    with Serve({"CorsAllowOrigins": "https://servicewechat.com"}) as serve:
        job_id = serve.post("头部菜")
        got = serve.http.get(f"{serve.base}/recipes/{job_id}", timeout=30)
        head = serve.http.head(f"{serve.base}/recipes/{job_id}", timeout=30)
        assert head.status_code == got.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        missing = serve.http.head(f"{serve.base}/recipes/0badc0de-0000-4000-8000-00000000000a", timeout=30)
        assert missing.status_code == 404 and missing.content == b""
        refused = httpx.put(f"{serve.base}/recipes", timeout=30, headers={"Origin": "https://servicewechat.com"})
        assert refused.status_code == 405
        assert refused.headers["access-control-allow-origin"] == "https://servicewechat.com"


def test_a_slot_frees_when_its_job_ends_whoever_polls() -> None:
    """Jobs nobody polls (closed mini-programs) hold every slot while they run; the workflow frees each slot
    as its job ends, so the next POST gets 202 then, not after the slots' leases (the deadline). Six slots
    say it as well as the default twenty, in a third of the time."""
    slots = 6
    with Serve({"RecipeConcurrency": str(slots), **ONE_CALLER, **WHOLE}, fake_pace_ms=8) as serve:
        jobs = [serve.post(f"没人等的菜{i}") for i in range(slots)]
        full = serve.http.post(f"{serve.base}/recipes", json={"dish": "多出来的菜"}, timeout=30)
        assert full.status_code == 429 and int(full.headers["retry-after"]) >= 1, full.text
        endpoint = re.search(r"the local cloud \(moto\) at (http://[\d.:]+)", serve.output())
        assert endpoint, serve.output()[-2000:]
        sfn = boto3.client(
            "stepfunctions",
            endpoint_url=endpoint[1],
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )  # nosec B106  # moto
        machine = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]

        def ended() -> list[ExecutionListItemTypeDef]:
            runs = [run for run in sfn.list_executions(stateMachineArn=machine)["executions"] if run["name"] in jobs]
            return runs if len(runs) == slots and all(run["status"] != "RUNNING" for run in runs) else []

        runs = wait_until(ended, timeout_s=120, what="every slot's job ended", interval_s=0.5)
        failed = [
            sfn.describe_execution(executionArn=run["executionArn"]) for run in runs if run["status"] != "SUCCEEDED"
        ]
        why = [(run["name"], run["status"], run.get("error"), run.get("cause")) for run in failed]
        assert not failed, (why, serve.output()[-3000:])
        again = serve.http.post(f"{serve.base}/recipes", json={"dish": "多出来的菜"}, timeout=30)
        assert again.status_code == 202, again.text


def test_an_idempotency_key_is_scoped_to_its_caller(api: LocalApi) -> None:
    """With the JWT authorizer on, the same Idempotency-Key from another user (another ``sub``) is another
    request: it must never hand back the first caller's job."""
    from chuixiang_local.gateway.api_client import http_event

    def post(sub: str, dish: str) -> tuple[int, dict[str, Any]]:
        event = http_event(
            "POST", "/recipes", json.dumps({"dish": dish}, ensure_ascii=False), {"Idempotency-Key": "the-same-key-0001"}
        )
        event["requestContext"]["authorizer"] = {"jwt": {"claims": {"sub": sub, "iss": "x"}, "scopes": None}}
        answer = api.invoke(event)
        return answer["statusCode"], json.loads(answer["body"])

    alice, alice_again = post("alice", "鱼香茄子"), post("alice", "鱼香茄子")
    assert alice[0] == alice_again[0] == 202 and alice[1]["jobId"] == alice_again[1]["jobId"]  # a retry: one job
    assert post("alice", "水煮牛肉")[0] == 422  # her key, another dish: refused, as before
    # Bob's same key with another dish is his own first request (with global keys it was alice's: 422).
    bob = post("bob", "水煮牛肉")
    assert bob[0] == 202 and bob[1]["jobId"] != alice[1]["jobId"], bob


# --- releases never break jobs in flight -------------------------------------------------------------


def _release_mid_job(
    fake: Any, tmp_path: Path, template: Template, code: dict[str, Path], published: Callable[[str], str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a job started before the release, one started after): the first job's recipe is held at the model (half
    its first-content limit) while ``code`` is released; each function must be at version ``published(lid)``."""
    from chuixiang_local.cloud.local_cloud import LocalCloud
    from chuixiang_local.model.fake_model import ChatBehaviour

    from ..support.scaled import SCALED

    with (
        open(tmp_path / "log", "w") as log,
        LocalCloud({**SCALED, **WHOLE}, model_base_url=fake.base_url, work_dir=tmp_path, log=log) as cloud,
    ):
        api = LocalApi(cloud)
        fake.chat_script.append(ChatBehaviour(headers_delay_s=template.number("RecipeFirstContentTimeoutMs") / 2000))
        before = api.post_dish(f"发布前的菜{len(code)}")[1]["jobId"]
        wait_until(lambda: fake.count("/chat/completions"), timeout_s=15, what="the first job's recipe call")
        assert cloud.release(code) == {lid: published(lid) for lid in cloud.functions}
        after = api.wait(api.post_dish(f"发布后的菜{len(code)}")[1]["jobId"], give_up_s=30)
        first = api.wait(before, give_up_s=30)
        assert cloud.release({}) == {lid: published(lid) for lid in cloud.functions}  # nothing changed: no version
    return first, after


def test_a_job_started_before_a_release_finishes_on_the_old_code(
    module_fake: Any, tmp_path: Path, scaled_template: Template
) -> None:
    """A deploy in the middle of a job: the job keeps the versions it started with; a job started after runs
    the new code. SAM publishes a version of the image function only: nothing else changed."""
    new_image = tmp_path / "image-v2"
    shutil.copytree(ROOT / "functions" / "image", new_image)
    (new_image / "app.py").write_text(  # the new release's image function: it fails every picture
        "def lambda_handler(event, context):\n    raise RuntimeError('image function v2')\n"
    )
    first, after = _release_mid_job(
        module_fake,
        tmp_path,
        scaled_template,
        {"ImageFunction": new_image},
        lambda lid: "2" if lid == "ImageFunction" else "1",
    )
    assert first["status"] == "SUCCEEDED" and first["image"] is not None and first["imageError"] is None, first
    assert after["status"] == "SUCCEEDED" and after["image"] is None and after["imageError"] is not None, after


def test_a_layer_only_release_reaches_new_jobs_and_a_running_one_keeps_its_layer(
    module_fake: Any, tmp_path: Path, scaled_template: Template
) -> None:
    """The function zips hold only app.py: a release of the layer alone must publish every function (SAM
    does, with AutoPublishAliasAllProperties and the layer's PublishLambdaVersion), and an execution already
    running must keep the layer its versions were published with."""
    new_layer = Path(shutil.copytree(ROOT / "layers" / "shared", tmp_path / "layer-v2"))
    steps = new_layer / "chuixiang" / "steps.py"
    steps.write_text(
        steps.read_text() + "\n\ndef run_image(*args, **kwargs):  # the new layer: every picture fails\n"
        "    raise RuntimeError('layer v2')\n"
    )
    first, after = _release_mid_job(module_fake, tmp_path, scaled_template, {"SharedLayer": new_layer}, lambda lid: "2")
    assert first["status"] == "SUCCEEDED" and first["image"] is not None and first["imageError"] is None, first
    assert after["status"] == "SUCCEEDED" and after["image"] is None and after["imageError"] is not None, after


# --- the template after SAM's transform --------------------------------------------------------------


def transform(region: str, code_dirs: dict[str, Path] | None = None) -> dict[str, Any]:
    template = Template()
    doc = sam.transformed(template.root / "template.yaml", template.doc, region=region, code_dirs=code_dirs)
    return dict(doc["Resources"])


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    """``template.yaml`` as CloudFormation will see it in a China region, the WeChat product's real target
    (``make test`` installs aws-sam-cli's venv first)."""
    return transform("cn-north-1")


def test_after_the_transform_no_partition_no_fixed_name_and_the_key_alarms_can_use(transformed: dict[str, Any]) -> None:
    literal = [
        (lid, path)
        for lid, r in transformed.items()
        for path, leaf in walk(r)
        if isinstance(leaf, str) and "arn:aws:" in leaf
    ]
    assert not literal, literal
    schedules = [r for r in transformed.values() if r["Type"] == "AWS::Scheduler::Schedule"]
    assert [s["Properties"]["Name"] for s in schedules] == [
        {"Fn::Sub": "${AWS::StackName}-canary"},
        {"Fn::Sub": "${AWS::StackName}-synthetic"},
    ]
    topic = next(r for r in transformed.values() if r["Type"] == "AWS::SNS::Topic")
    assert topic["Properties"]["KmsMasterKeyId"] == {"Ref": "AlarmTopicKey"}
    for lid in ("JobsTable", "ImagesBucket"):
        assert transformed[lid]["UpdateReplacePolicy"] == "Retain"
        assert transformed[lid]["DeletionPolicy"] in ("Retain", "RetainExceptOnCreate")


def test_after_the_transform_executions_call_versions_and_start_on_the_alias(transformed: dict[str, Any]) -> None:
    versions = {lid for lid, r in transformed.items() if r["Type"] == "AWS::Lambda::Version"}
    machine = next(r for r in transformed.values() if r["Type"] == "AWS::StepFunctions::StateMachine")
    called = {
        machine["Properties"]["DefinitionSubstitutions"][f"{n}FunctionArn"]["Ref"]
        for n in ("Submit", "Recipe", "Image")
    }
    assert called <= versions  # immutable versions, not $LATEST or an alias that moves during a job
    alias = transformed["RecipeStateMachineAliaslive"]
    assert alias["Type"] == "AWS::StepFunctions::StateMachineAlias"
    assert any(r["Type"] == "AWS::StepFunctions::StateMachineVersion" for r in transformed.values())
    api = transformed["ApiFunction"]["Properties"]
    assert api["SnapStart"] == {"Fn::If": ["IsChina", {"Ref": "AWS::NoValue"}, {"ApplyOn": "PublishedVersions"}]}
    # The state machine traces, and SAM gave its role the X-Ray policy (an intrinsic on Tracing would drop it).
    role = json.dumps(transformed["RecipeStateMachineRole"])
    assert transformed["RecipeStateMachine"]["Properties"]["TracingConfiguration"] == {"Enabled": True}
    assert "xray" in role.lower()  # AWSXRayDaemonWriteAccess in aws-cn, AWSXrayWriteOnlyAccess elsewhere
    assert transformed["ApiFunctionAliaslive"]["UpdatePolicy"]["CodeDeployLambdaAliasUpdate"]  # gradual rollout


def test_a_layer_only_release_publishes_every_function_and_an_unchanged_one_none(
    transformed: dict[str, Any], tmp_path: Path
) -> None:
    """The function zips hold only app.py: without AutoPublishAliasAllProperties and the layer's
    PublishLambdaVersion, SAM hashes only the code location, and a release of the layer reaches no version."""
    before = sam.version_ids(transformed)
    assert set(before) == {lid for lid, r in transformed.items() if r["Type"] == "AWS::Lambda::Function"}
    assert sam.version_ids(transform("cn-north-1")) == before  # the same code: no new version
    layer = Path(shutil.copytree(ROOT / "layers" / "shared", tmp_path / "shared"))
    (layer / "chuixiang" / "__init__.py").write_text((layer / "chuixiang" / "__init__.py").read_text() + "\n")
    after = sam.version_ids(transform("cn-north-1", {"SharedLayer": layer}))
    assert all(after[f] != before[f] for f in before), (before, after)
    api = Path(shutil.copytree(ROOT / "functions" / "api", tmp_path / "api"))
    (api / "app.py").write_text((api / "app.py").read_text() + "\n")
    api_only = sam.version_ids(transform("cn-north-1", {"ApiFunction": api}))
    assert {f for f in before if api_only[f] != before[f]} == {"ApiFunction"}
