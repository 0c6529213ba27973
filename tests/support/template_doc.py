"""The template as read (parameters' defaults, the nested observability read into it), and a walk over any
fragment of it."""

from __future__ import annotations

from typing import Any

from stack_template import Template

DOC = Template().doc
RESOURCES: dict[str, Any] = DOC["Resources"]


def walk(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (path, leaf) of a template fragment."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in walk(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in walk(v, f"{path}[{i}]")]
    return [(path, value)]
