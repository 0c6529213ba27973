"""Print ``template.yaml`` after SAM's transform, as JSON:
``.venv-sam/bin/python tests/sam_transform.py [PARAMETERS_JSON] [REGION]`` (a China region transforms for aws-cn).

Runs in the aws-sam-cli venv (its translator pins a pydantic the app cannot use), so the tests call it as a
subprocess. Local ``CodeUri``/``ContentUri``/``DefinitionUri`` are replaced by S3 URIs first, as ``sam
package`` would; nothing calls AWS (no managed policy is looked up by name).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from samcli.yamlhelper import yaml_parse  # type: ignore[import-not-found]
from samtranslator.translator.transform import transform  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[1]


class NoManagedPolicies:
    def load(self) -> dict[str, str]:
        return {}


def main() -> None:
    region = sys.argv[2] if len(sys.argv) > 2 else "us-east-1"
    partition = "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
    os.environ["AWS_DEFAULT_REGION"] = region  # the translator's boto session derives the partition from it
    doc: dict[str, Any] = yaml_parse((ROOT / "template.yaml").read_text())
    params = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    for name, value in params.items():
        doc["Parameters"][name]["Default"] = value
    for resource in doc["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str):
                props[key] = f"s3://artifacts/{props[key].strip('/')}.zip"
        if isinstance(props.get("DefinitionUri"), str):
            props["DefinitionUri"] = f"s3://artifacts/{props['DefinitionUri']}"
    pseudo = {"AWS::Region": region, "AWS::Partition": partition, "AWS::AccountId": "123456789012"}
    print(json.dumps(transform(doc, pseudo, NoManagedPolicies()), default=str))


if __name__ == "__main__":
    main()
