"""Print ``template.yaml`` after SAM's transform, as JSON. Run by the translator's own Python, not ours:

    .venv-sam/bin/python local/chuixiang_local/sam_transform.py < REQUEST_JSON

``REQUEST_JSON``: ``{"template": PATH, "region": "cn-north-1", "params": {...}, "content": {URI: DIGEST}}``.

The translator (``aws-sam-translator``, the version aws-sam-cli pins; the Makefile installs it alone for
``make run``) pins a pydantic the app cannot use, so the local cloud and the tests call this as a subprocess
(:mod:`chuixiang_local.cloud.sam`), and it imports of ours only the template reader (PyYAML alone).

The nested observability template is read in first (:mod:`stack_template.nested`): the output is every
resource the app creates, as one stack. Local ``CodeUri``/``ContentUri``/``DefinitionUri`` are replaced by S3
URIs, as ``sam package`` does: named by a digest of their content (``content``), so a change of code or layer
changes what SAM hashes into version ids, as on a real deploy.
Nothing calls AWS (no managed policy is looked up by name).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from samtranslator.translator.transform import transform

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from stack_template import CfnLoader, inline_nested  # after the path: this venv has not installed us


class NoManagedPolicies:
    def load(self) -> dict[str, str]:
        return {}


def partition_of(region: str) -> str:
    return "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"


def packaged(doc: dict[str, Any], content: dict[str, str]) -> dict[str, Any]:
    """``doc`` with its local artifact paths as ``sam package`` leaves them: S3 URIs named by content."""
    for resource in doc["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri", "DefinitionUri"):
            uri = props.get(key)
            if isinstance(uri, str) and not uri.startswith("s3://"):
                digest = content.get(uri, "unhashed")
                props[key] = f"s3://artifacts/{digest}" if key != "DefinitionUri" else f"s3://artifacts/{uri}"
    return doc


def main() -> None:
    request = json.load(sys.stdin)
    region = request.get("region", "us-east-1")
    os.environ["AWS_DEFAULT_REGION"] = region  # the translator's boto session derives the partition from it
    path = Path(request["template"])
    doc: dict[str, Any] = yaml.load(path.read_text(), Loader=CfnLoader)  # nosec B506
    # What the app creates in all: the nested observability's resources in place of its application (the
    # translator would leave an AWS::CloudFormation::Stack naming a file; CloudFormation creates what it holds).
    doc = inline_nested(doc, path.parent)
    for name, value in request.get("params", {}).items():
        doc["Parameters"][name]["Default"] = value
    pseudo = {"AWS::Region": region, "AWS::Partition": partition_of(region), "AWS::AccountId": "123456789012"}
    out = transform(packaged(doc, request.get("content", {})), pseudo, NoManagedPolicies())
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
