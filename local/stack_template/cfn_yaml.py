"""CloudFormation's YAML: its short-form tags, and the error a template that cannot be read raises."""

from __future__ import annotations

import pickle  # nosec B403  # our own bytes, pickled in this process
import threading
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


#: Each text read so far, parsed and pickled. A test run builds ~450 templates; libyaml reads the two
#: templates in ~20 ms (its constructor is Python), a pickled copy loads in ~0.5 ms.
_PARSED: dict[str, bytes] = {}
_PARSED_LOCK = threading.Lock()


def load_cfn(text: str) -> Any:
    """``text`` read as CloudFormation YAML, parsed once per process and text: each call gets its own copy,
    which it may change."""
    with _PARSED_LOCK:
        parsed = _PARSED.get(text)
    if parsed is None:
        doc = yaml.load(text, Loader=CfnLoader)  # nosec B506  # SafeLoader + CFN tags
        parsed = pickle.dumps(doc, pickle.HIGHEST_PROTOCOL)
        with _PARSED_LOCK:
            _PARSED[text] = parsed
    return pickle.loads(parsed)  # nosec B301  # bytes this process pickled
