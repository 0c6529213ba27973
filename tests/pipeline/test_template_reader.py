"""The template reader reads every CloudFormation short-form tag as cfn-lint's decoder does (here, not in the
unit tier: importing cfn-lint alone takes ~0.6-0.8 s, which is also why it is imported by a fixture: each pytest
process collects this module, one runs it)."""

from __future__ import annotations

import importlib
import json
from types import ModuleType

import pytest
import yaml
from stack_template import REPO_ROOT, CfnLoader

EVERY_TAG = """
A: !Condition IsProd
B: !GetAtt Res.Arn
C: !Sub ["${x}", {x: !Ref Y}]
D: !If [C1, !Ref A, !Ref "AWS::NoValue"]
E: !Select [0, !GetAZs ""]
F: !Base64 "x"
G: !FindInMap [M, K, V]
H: !Split [",", "a,b"]
I: !Equals [a, b]
J: !And [!Condition A, !Not [!Condition B]]
K: !ImportValue X
L: !Cidr [a, 1, 2]
M: !Join [",", [a, b]]
N: !GetAtt [Res, Arn]
O: !Sub "arn:${AWS::Partition}:s3:::${Bucket}/*"
P: !Or [!Equals [a, b], !Condition C]
"""


@pytest.fixture(scope="module")
def cfn_yaml() -> ModuleType:
    """cfn-lint's YAML decoder (``cfnlint.decode.cfn_yaml``)."""
    return importlib.import_module("cfnlint.decode.cfn_yaml")


def _plain(value: object) -> object:
    return json.loads(json.dumps(value))


def test_every_short_form_tag_as_cfn_lint_reads_it(cfn_yaml: ModuleType) -> None:
    assert _plain(yaml.load(EVERY_TAG, Loader=CfnLoader)) == _plain(cfn_yaml.loads(EVERY_TAG, "tags"))  # nosec B506


@pytest.mark.parametrize("path", ["template.yaml", "observability/template.yaml"])
def test_the_templates_as_cfn_lint_reads_them(path: str, cfn_yaml: ModuleType) -> None:
    text = (REPO_ROOT / path).read_text()
    assert _plain(yaml.load(text, Loader=CfnLoader)) == _plain(cfn_yaml.loads(text, path))  # nosec B506
