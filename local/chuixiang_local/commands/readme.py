"""Rewrite the documents' generated blocks (``python -m chuixiang_local.commands.readme``): the ladder table of
``docs/ladder.md``."""

from __future__ import annotations

import re

from chuixiang_local.commands.ladder import markdown_table
from chuixiang_local.template import REPO_ROOT, Template

BLOCK = re.compile(r"(<!-- ladder:begin -->\n).*?(<!-- ladder:end -->)", re.DOTALL)


def main() -> None:
    path = REPO_ROOT / "docs" / "ladder.md"
    text = path.read_text()
    path.write_text(BLOCK.sub(lambda m: m.group(1) + markdown_table(Template()) + "\n" + m.group(2), text))


if __name__ == "__main__":
    main()
