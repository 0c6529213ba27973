"""Nothing China does not offer: ``docs/china.md``'s table, held against SAM's transform in both China regions.

Each row of the table is one item of a China guide page's "not available" list, with the check named in its
last column. A check reads what CloudFormation would create (SAM's output, conditions evaluated for the
partition) and returns the resources that ask for the item. In ``aws-cn`` every check must return nothing; each
check must also flag an example of what it looks for (and, for what the stack uses outside China, the stack in
``aws``), so a check that looks at nothing fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from stack_template import REPO_ROOT, Template

from chuixiang_local.cloud import sam
from tests.support.cfn_conditions import Created

Resources = dict[str, dict[str, Any]]

CHINA_REGIONS = ("cn-north-1", "cn-northwest-1")
ACCOUNT = "123456789012"


def every_feature_on(region: str) -> dict[str, str]:
    """Parameters that create every optional resource, so that no conditional one escapes the checks."""
    partition = "aws-cn" if region.startswith("cn-") else "aws"
    return {
        "CanaryModels": "gpt-6-luna",
        "JwtIssuer": "https://login.example.cn",
        "JwtAudience": "chuixiang",
        "SyntheticTokenSecretArn": f"arn:{partition}:secretsmanager:{region}:{ACCOUNT}:secret:synthetic-AbCdEf",
        "ModelApiKeyKmsKeyArn": f"arn:{partition}:kms:{region}:{ACCOUNT}:key/0f3c1b2a-1111-2222-3333-444455556666",
        "ApiDomainName": "api.example.cn",
        "ApiCertificateArn": f"arn:{partition}:acm:{region}:{ACCOUNT}:certificate/0f3c1b2a-aaaa-bbbb-cccc-ddddeeeeffff",
        "AlarmEmail": "oncall@example.cn",
        "TicketEmail": "tickets@example.cn",
        "RecipeReservedConcurrency": "20",
        "ModelBudgetUsdPerHour": "5",
    }


def created(region: str, params: dict[str, str]) -> Resources:
    template = Template()
    doc = sam.transformed(template.root / "template.yaml", template.doc, region=region, params=params)
    return Created(doc, region).resources()


def of_type(resources: Resources, rtype: str) -> Resources:
    return {lid: r for lid, r in resources.items() if r["Type"] == rtype}


def functions(resources: Resources) -> dict[str, dict[str, Any]]:
    return {lid: r.get("Properties", {}) for lid, r in of_type(resources, "AWS::Lambda::Function").items()}


# --- the checks: each returns what asks for the item ------------------------------------------------------


def lambda_xray(resources: Resources) -> list[str]:
    return [lid for lid, p in functions(resources).items() if p.get("TracingConfig", {}).get("Mode") == "Active"]


def lambda_function_url(resources: Resources) -> list[str]:
    return list(of_type(resources, "AWS::Lambda::Url"))


ASYNC_METRICS = ("AsyncEventsReceived", "AsyncEventAge", "AsyncEventsDropped")


def lambda_async_metrics(resources: Resources) -> list[str]:
    return [lid for lid, r in resources.items() if any(m in json.dumps(r) for m in ASYNC_METRICS)]


def lambda_recursive_loop(resources: Resources) -> list[str]:
    return [lid for lid, p in functions(resources).items() if "RecursiveLoop" in p]


def lambda_zip_kms(resources: Resources) -> list[str]:
    return [lid for lid, p in functions(resources).items() if "SourceKMSKeyArn" in p.get("Code", {})]


def lambda_snapstart(resources: Resources) -> list[str]:
    return [
        lid
        for lid, p in functions(resources).items()
        if p.get("SnapStart", {}).get("ApplyOn", "None") != "None"
        and str(p.get("Runtime", "")).startswith(("python", "dotnet"))
    ]


def lambda_s3_destination(resources: Resources) -> list[str]:
    configs = {
        **of_type(resources, "AWS::Lambda::EventInvokeConfig"),
        **of_type(resources, "AWS::Lambda::EventSourceMapping"),
    }
    return [lid for lid, r in configs.items() if re.search(r'"arn:[^"]*:s3:::', json.dumps(r.get("Properties", {})))]


def lambda_event_source_mapping(resources: Resources) -> list[str]:
    return list(of_type(resources, "AWS::Lambda::EventSourceMapping"))


def apigw_edge(resources: Resources) -> list[str]:
    edge = []
    for lid, r in resources.items():
        props = json.dumps(r.get("Properties", {}))
        if r["Type"].startswith("AWS::ApiGateway") and '"EDGE"' in props:
            edge.append(lid)
        if r["Type"] == "AWS::ApiGateway::RestApi" and "EndpointConfiguration" not in r.get("Properties", {}):
            edge.append(lid)  # a REST API is edge-optimized unless it says otherwise
    return edge


def apigw_own_domain(resources: Resources) -> list[str]:
    """The HTTP APIs reachable without an ICP-filed domain of their own: no domain mapped, or execute-api on."""
    mapped = {
        json.dumps(r["Properties"]["ApiId"]) for r in of_type(resources, "AWS::ApiGatewayV2::ApiMapping").values()
    }
    open_apis = []
    for lid, r in of_type(resources, "AWS::ApiGatewayV2::Api").items():
        body = r["Properties"].get("Body", {})
        endpoint = [s.get("x-amazon-apigateway-endpoint-configuration", {}) for s in body.get("servers", [])]
        disabled = any(e.get("disableExecuteApiEndpoint") is True for e in endpoint)
        if json.dumps({"Ref": lid}) not in mapped or not disabled:
            open_apis.append(lid)
    return open_apis


def apigw_cognito_authorizer(resources: Resources) -> list[str]:
    return [
        lid
        for lid, r in resources.items()
        if r["Type"] in ("AWS::ApiGateway::Authorizer", "AWS::ApiGatewayV2::Authorizer")
        and "COGNITO" in json.dumps(r.get("Properties", {})).upper()
    ]


def apigw_cloud_map(resources: Resources) -> list[str]:
    return [
        lid
        for lid, r in of_type(resources, "AWS::ApiGatewayV2::Integration").items()
        if ":servicediscovery:" in json.dumps(r.get("Properties", {}))
    ]


def sfn_https(resources: Resources) -> list[str]:
    machines = of_type(resources, "AWS::StepFunctions::StateMachine")
    asl = [p.read_text() for p in (REPO_ROOT / "statemachine").glob("*.asl.json")]
    inline = [json.dumps(r.get("Properties", {})) for r in machines.values()]
    return [f"statemachine ({n})" for n, text in enumerate(asl + inline) if "states:::http:invoke" in text]


def sns_custom_data_identifiers(resources: Resources) -> list[str]:
    return [
        lid
        for lid, r in of_type(resources, "AWS::SNS::Topic").items()
        if "CustomDataIdentifiers" in json.dumps(r.get("Properties", {}).get("DataProtectionPolicy", {}))
    ]


def sqs_redrive(resources: Resources) -> list[str]:
    docs = sorted((REPO_ROOT / "docs").glob("*.md"))
    return [
        p.name
        for p in docs
        if p.name != "china.md" and re.search(r"start-message-move-task|StartMessageMoveTask", p.read_text())
    ]


def codedeploy_outdated_instances(resources: Resources) -> list[str]:
    groups = of_type(resources, "AWS::CodeDeploy::DeploymentGroup")
    return [lid for lid, r in groups.items() if r.get("Properties", {}).get("OutdatedInstancesStrategy") == "UPDATE"]


CHECKS: dict[str, Callable[[Resources], list[str]]] = {
    "lambda-xray": lambda_xray,
    "lambda-function-url": lambda_function_url,
    "lambda-async-metrics": lambda_async_metrics,
    "lambda-recursive-loop": lambda_recursive_loop,
    "lambda-zip-kms": lambda_zip_kms,
    "lambda-snapstart": lambda_snapstart,
    "lambda-s3-destination": lambda_s3_destination,
    "lambda-event-source-mapping": lambda_event_source_mapping,
    "apigw-edge": apigw_edge,
    "apigw-own-domain": apigw_own_domain,
    "apigw-cognito-authorizer": apigw_cognito_authorizer,
    "apigw-cloud-map": apigw_cloud_map,
    "sfn-https": sfn_https,
    "sns-custom-data-identifiers": sns_custom_data_identifiers,
    "sqs-redrive": sqs_redrive,
    "codedeploy-outdated-instances": codedeploy_outdated_instances,
}

_FN = "AWS::Lambda::Function"
#: For each check, a resource it must flag: the check can see what it is for.
EXAMPLES: dict[str, Resources] = {
    "lambda-function-url": {"U": {"Type": "AWS::Lambda::Url", "Properties": {}}},
    "lambda-async-metrics": {"A": {"Type": "AWS::CloudWatch::Alarm", "Properties": {"MetricName": "AsyncEventAge"}}},
    "lambda-recursive-loop": {"F": {"Type": _FN, "Properties": {"RecursiveLoop": "Allow"}}},
    "lambda-zip-kms": {"F": {"Type": _FN, "Properties": {"Code": {"SourceKMSKeyArn": "arn:aws-cn:kms:x"}}}},
    "lambda-s3-destination": {
        "E": {
            "Type": "AWS::Lambda::EventInvokeConfig",
            "Properties": {"DestinationConfig": {"OnFailure": {"Destination": "arn:aws-cn:s3:::bucket"}}},
        }
    },
    "lambda-event-source-mapping": {"M": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {}}},
    "apigw-edge": {"R": {"Type": "AWS::ApiGateway::RestApi", "Properties": {"Name": "x"}}},
    "apigw-cognito-authorizer": {
        "Z": {"Type": "AWS::ApiGateway::Authorizer", "Properties": {"Type": "COGNITO_USER_POOLS"}}
    },
    "apigw-cloud-map": {
        "I": {
            "Type": "AWS::ApiGatewayV2::Integration",
            "Properties": {"IntegrationUri": "arn:aws-cn:servicediscovery:cn-north-1:1:service/srv-1"},
        }
    },
    "sns-custom-data-identifiers": {
        "T": {
            "Type": "AWS::SNS::Topic",
            "Properties": {"DataProtectionPolicy": {"Configuration": {"CustomDataIdentifiers": []}}},
        }
    },
    "codedeploy-outdated-instances": {
        "G": {"Type": "AWS::CodeDeploy::DeploymentGroup", "Properties": {"OutdatedInstancesStrategy": "UPDATE"}}
    },
}


def table_rows() -> list[tuple[str, str]]:
    """``(item, check)`` for each row of docs/china.md's table of what China does not offer."""
    text = (REPO_ROOT / "docs" / "china.md").read_text()
    section = text.split("## What China does not offer", 1)[1].split("\n## ", 1)[0]
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("|") and not line.startswith(("| service page", "|---"))
    ]
    return [(cells[1], cells[3].strip("`")) for cells in rows]


@pytest.fixture(scope="module", params=CHINA_REGIONS)
def in_china(request: pytest.FixtureRequest) -> Resources:
    return created(request.param, every_feature_on(request.param))


@pytest.fixture(scope="module")
def in_aws() -> Resources:
    return created("us-east-1", every_feature_on("us-east-1"))


def test_the_table_names_a_check_for_every_item_and_every_check_has_its_row() -> None:
    named = [check for _, check in table_rows() if check != "—"]
    assert sorted(named) == sorted(CHECKS), "docs/china.md's checks and this file's differ"
    assert len(table_rows()) >= len(CHECKS) + 3  # the rows with nothing a template asks for stay listed


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_china_is_asked_for_nothing_it_does_not_offer(in_china: Resources, check: str) -> None:
    assert CHECKS[check](in_china) == [], f"{check}: China's page lists it as not available"


@pytest.mark.parametrize("check", sorted(EXAMPLES))
def test_each_check_flags_what_it_is_for(check: str) -> None:
    assert CHECKS[check](EXAMPLES[check]) == list(EXAMPLES[check])


def test_outside_china_the_stack_keeps_tracing_snapstart_and_the_xray_policy(in_aws: Resources) -> None:
    traced = lambda_xray(in_aws)
    assert set(traced) == set(functions(in_aws)), "every function traces outside China"
    assert lambda_snapstart(in_aws) == ["ApiFunction"]
    roles = of_type(in_aws, "AWS::IAM::Role")
    for lid in traced:
        assert "AWSXrayWriteOnlyAccess" in json.dumps(roles[f"{lid}Role"]), lid


def test_in_china_the_roles_carry_only_an_unused_xray_write_policy(in_china: Resources) -> None:
    """The intrinsic on ``Tracing`` makes SAM attach its X-Ray policy whatever the partition (it leaves it off
    only for a literal ``Disabled``): in China a permission nothing uses. It must be the partition's own
    managed policy, or the create fails on an ARN that does not exist there."""
    roles = of_type(in_china, "AWS::IAM::Role")
    for lid in functions(in_china):
        arns = roles[f"{lid}Role"]["Properties"]["ManagedPolicyArns"]
        assert "arn:aws-cn:iam::aws:policy/AWSXRayDaemonWriteAccess" in arns, (lid, arns)
        assert all(str(a).startswith("arn:aws-cn:") for a in arns if isinstance(a, str)), (lid, arns)


def test_with_its_own_domain_the_api_is_reachable_only_there(in_china: Resources) -> None:
    domain = of_type(in_china, "AWS::ApiGatewayV2::DomainName")
    ((_, resource),) = domain.items()
    config = resource["Properties"]["DomainNameConfigurations"]
    assert config == [
        {"CertificateArn": {"Ref": "ApiCertificateArn"}, "EndpointType": "REGIONAL", "SecurityPolicy": "TLS_1_2"}
    ]
    assert apigw_own_domain(in_china) == []
    synthetic = functions(in_china)["SyntheticFunction"]["Environment"]["Variables"]["API_URL"]
    assert synthetic == {"Fn::Sub": "https://${ApiDomainName}"}


@pytest.mark.parametrize("region", ["cn-north-1", "us-east-1"])
def test_without_a_domain_the_api_keeps_its_execute_api_url(region: str) -> None:
    params = {k: v for k, v in every_feature_on(region).items() if k not in ("ApiDomainName", "ApiCertificateArn")}
    resources = created(region, params)
    assert apigw_own_domain(resources) == ["RecipeApi"]  # in China: reachable by nobody (docs/china.md)
    assert not of_type(resources, "AWS::ApiGatewayV2::DomainName")
    url = functions(resources)["SyntheticFunction"]["Environment"]["Variables"]["API_URL"]
    assert url == {"Fn::Sub": "https://${RecipeApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}"}
