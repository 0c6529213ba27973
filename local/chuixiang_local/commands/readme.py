"""Rewrite the documents' generated blocks (``make docs``): the ladder table of ``docs/ladder.md``, the module
table and the state machine's flow of ``docs/architecture.md``, the sections bench's tables
(``docs/sections.md``, ``docs/capacity.md``, ``docs/ladder.md``) from ``docs/bench/sections.json``, and the
simulated evening's (``docs/capacity.md``)."""

from __future__ import annotations

import re

from stack_template import REPO_ROOT, Template

from chuixiang_local.commands import flow, layout, sections_bench
from chuixiang_local.commands.ladder import markdown_table
from chuixiang_local.evening.report import tables as evening_tables


def rewrite(page: str, block: str, content: str) -> None:
    """Replace what stands between ``<!-- block:begin -->`` and ``<!-- block:end -->`` in ``docs/page``."""
    path = REPO_ROOT / "docs" / page
    pattern = re.compile(rf"(<!-- {block}:begin -->\n).*?(<!-- {block}:end -->)", re.DOTALL)
    path.write_text(pattern.sub(lambda m: m.group(1) + content + "\n" + m.group(2), path.read_text()))


def main() -> None:
    rewrite("ladder.md", "ladder", markdown_table(Template()))
    rewrite("architecture.md", "layout", layout.markdown_table())
    rewrite("architecture.md", "flow", flow.markdown_table())
    for page, block, content in sections_blocks():
        rewrite(page, block, content)
    rewrite("capacity.md", "evening", evening_tables())


def sections_blocks() -> list[tuple[str, str, str]]:
    """(page, block, content) of every block drawn from the sections bench's figures."""
    rows = sections_bench.load(REPO_ROOT / "docs" / "bench" / "sections.json")
    total_ms = Template().number("RecipeTotalTimeoutMs")
    return [
        ("sections.md", "sections-bench", sections_bench.markdown(rows)),
        ("sections.md", "sections-goals", sections_bench.goals(rows)),
        ("capacity.md", "streams", sections_bench.streams_table(rows)),
        ("ladder.md", "sections", sections_bench.ladder_line(rows, total_ms)),
    ]


if __name__ == "__main__":
    main()
