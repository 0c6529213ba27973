"""The nested observability template read into the app (``stack_template.nested``): its parameters bound to what
the app passes, its conditions kept apart, and what CloudFormation would refuse refused here too."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from stack_template import REPO_ROOT, CfnLoader, ConfigError, Template, inline_nested, load_cfn

PARENT = """
Conditions:
  HasCanary: !Equals [!Ref CanaryModels, "x"]
Resources:
  Topic: {Type: AWS::SNS::Topic}
  Canary: {Type: AWS::Serverless::Function, Condition: HasCanary}
  Watch:
    Type: AWS::Serverless::Application
    Properties:
      Location: watch.yaml
      Parameters:
        StackName: !Ref AWS::StackName
        AlarmTopic: !Ref Topic
        CanaryFunction: !If [HasCanary, !Ref Canary, ""]
"""

CHILD = """
Parameters:
  StackName: {Type: String}
  AlarmTopic: {Type: String}
  CanaryFunction: {Type: String, Default: ""}
  Period: {Type: Number, Default: 300}
Conditions:
  HasCanary: !Not [!Equals [!Ref CanaryFunction, ""]]
Resources:
  CanaryAlarm:
    Type: AWS::CloudWatch::Alarm
    Condition: HasCanary
    Properties:
      AlarmName: !Sub "${StackName}-CanaryAlarm"
      AlarmActions: [!Ref AlarmTopic]
      Period: !Ref Period
      Dimensions: [{Name: FunctionName, Value: !If [HasCanary, !Ref CanaryFunction, !Ref AWS::NoValue]}]
"""


def _inlined(tmp_path: Path, parent: str = PARENT, child: str = CHILD) -> dict[str, Any]:
    (tmp_path / "watch.yaml").write_text(child)
    return inline_nested(yaml.load(parent, Loader=CfnLoader), tmp_path)  # nosec B506


def test_the_childs_parameters_become_what_the_app_passes(tmp_path: Path) -> None:
    doc = _inlined(tmp_path)
    assert "Watch" not in doc["Resources"] and list(doc["Resources"]) == ["Topic", "Canary", "CanaryAlarm"]
    alarm = doc["Resources"]["CanaryAlarm"]
    props = alarm["Properties"]
    assert props["AlarmActions"] == [{"Ref": "Topic"}]
    assert props["AlarmName"] == {"Fn::Sub": ["${StackName}-CanaryAlarm", {"StackName": {"Ref": "AWS::StackName"}}]}
    assert props["Period"] == "300"  # a default, as CloudFormation passes it: a string
    # The child's own condition, renamed so that it cannot stand for the app's HasCanary.
    assert alarm["Condition"] == "WatchHasCanary"
    assert props["Dimensions"][0]["Value"]["Fn::If"][0] == "WatchHasCanary"
    assert doc["Conditions"]["WatchHasCanary"] == {
        "Fn::Not": [{"Fn::Equals": [{"Fn::If": ["HasCanary", {"Ref": "Canary"}, ""]}, ""]}]
    }
    assert doc["Conditions"]["HasCanary"] == {"Fn::Equals": [{"Ref": "CanaryModels"}, "x"]}


@pytest.mark.parametrize(
    ("edit", "refused"),
    [
        (lambda p, c: (p.replace("AlarmTopic: !Ref Topic", "AlarmTopicz: !Ref Topic"), c), "unknown"),
        (lambda p, c: (p.replace("        AlarmTopic: !Ref Topic\n", ""), c), "missing ['AlarmTopic']"),
        (lambda p, c: (p, c.replace("${StackName}-CanaryAlarm", "${AWS::StackName}-CanaryAlarm")), "AWS::StackName"),
        (lambda p, c: (p, c.replace("Period: !Ref Period", "Period: !Ref AWS::StackName")), "AWS::StackName"),
        (lambda p, c: (p, c.replace("  CanaryAlarm:\n", "  Topic:\n")), "logical ids"),
        (
            lambda p, c: (
                p.replace(
                    "Type: AWS::Serverless::Application\n",
                    "Type: AWS::Serverless::Application\n    Condition: HasCanary\n",
                ),
                c,
            ),
            "conditional",
        ),
    ],
    ids=["unknown parameter", "missing parameter", "own stack name in Sub", "own stack name", "clash", "conditional"],
)
def test_what_cloudformation_would_refuse_is_refused(tmp_path: Path, edit: Any, refused: str) -> None:
    parent, child = edit(PARENT, CHILD)
    with pytest.raises(ConfigError, match=refused.replace("[", r"\[").replace("]", r"\]")):
        _inlined(tmp_path, parent, child)


def test_the_app_reads_as_one_stack() -> None:
    """Every alarm of the nested template is the app's, named ``<stack>-<logical id>`` (the runbook's prefixes),
    and paging to the app's topics."""
    template = Template()
    raw = yaml.load((REPO_ROOT / "observability" / "template.yaml").read_text(), Loader=CfnLoader)  # nosec B506
    kinds = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
    alarms = [lid for lid, r in raw["Resources"].items() if r["Type"] in kinds]
    assert len(alarms) > 50 and set(raw["Resources"]) <= set(template.resources)
    for lid in alarms:
        assert template.resolve(template.resources[lid]["Properties"]["AlarmName"]) == f"chuixiang-local-{lid}"
    page = template.resolve(template.resources["JobSuccessBurnAlarm"]["Properties"]["AlarmActions"])
    assert page == [template.physical["AlarmTopic"]["Ref"]]


def test_a_deploy_may_create_the_nested_application() -> None:
    """ "Applications that contain one or more nested applications require you to specify
    CAPABILITY_AUTO_EXPAND" (Serverless Application Repository guide, acknowledging capabilities), and "the
    maximum number of parameters a nested application can have is 60" (SAM developer guide, nested applications)."""
    raw = yaml.load((REPO_ROOT / "template.yaml").read_text(), Loader=CfnLoader)  # nosec B506
    apps = {lid: r for lid, r in raw["Resources"].items() if r["Type"] == "AWS::Serverless::Application"}
    assert list(apps) == ["Observability"]
    deploy = tomllib.loads((REPO_ROOT / "samconfig.toml").read_text())["default"]["deploy"]["parameters"]
    assert "CAPABILITY_AUTO_EXPAND" in deploy["capabilities"].split()
    child = yaml.load((REPO_ROOT / apps["Observability"]["Properties"]["Location"]).read_text(), Loader=CfnLoader)  # nosec B506
    assert len(child["Parameters"]) <= 60


def test_each_read_of_a_template_is_the_readers_own() -> None:
    """``load_cfn`` parses a text once per process: what one reader changes, the next never sees."""
    text = (REPO_ROOT / "template.yaml").read_text()
    first = load_cfn(text)
    first["Resources"].clear()
    again = load_cfn(text)
    assert again["Resources"] and again == yaml.load(text, Loader=CfnLoader)  # nosec B506  # SafeLoader + CFN tags
    assert again is not load_cfn(text)
