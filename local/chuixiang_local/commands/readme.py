"""Rewrite the documents' generated blocks (``make docs``): the ladder table of ``docs/ladder.md`` and the
module table of ``docs/architecture.md``."""

from __future__ import annotations

import re

from chuixiang_local.commands import layout
from chuixiang_local.commands.ladder import markdown_table
from chuixiang_local.template import REPO_ROOT, Template


def rewrite(page: str, block: str, content: str) -> None:
    """Replace what stands between ``<!-- block:begin -->`` and ``<!-- block:end -->`` in ``docs/page``."""
    path = REPO_ROOT / "docs" / page
    pattern = re.compile(rf"(<!-- {block}:begin -->\n).*?(<!-- {block}:end -->)", re.DOTALL)
    path.write_text(pattern.sub(lambda m: m.group(1) + content + "\n" + m.group(2), path.read_text()))


def main() -> None:
    rewrite("ladder.md", "ladder", markdown_table(Template()))
    rewrite("architecture.md", "layout", layout.markdown_table())


if __name__ == "__main__":
    main()
