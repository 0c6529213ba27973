"""CloudFormation's YAML: its short-form tags, and the error a template that cannot be read raises."""

from __future__ import annotations

from typing import Any

import yaml


class ConfigError(Exception):
    """Bad configuration (unknown override, wrong type, broken ladder): exit code 2."""


class CfnLoader(yaml.CSafeLoader):
    """YAML with CloudFormation's short-form tags (``!Ref``, ``!GetAtt a.b``, ``!Condition``, ``!Sub``…), as
    cfn-lint's decoder reads them (``tests/pipeline/test_template_reader.py`` checks every tag against it).

    Why not cfn-lint's decoder itself: importing it costs ~0.8 s (it imports cfn-lint whole), and every
    ``chuixiang`` command and local Lambda worker reads the template once; this loader, on libyaml, reads
    ``template.yaml`` in ~18 ms (cfn-lint's in ~23 ms, the pure-Python loader used before in ~146 ms)."""


def _construct_tag(loader: CfnLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if tag_suffix in ("Ref", "Condition"):  # not functions: {"Ref": x}, {"Condition": x}
        return {tag_suffix: value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{tag_suffix}": value}


CfnLoader.add_multi_constructor("!", _construct_tag)
