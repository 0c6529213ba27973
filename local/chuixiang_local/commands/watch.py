"""What ``chuixiang cook`` shows on stderr while a job runs: stage, progress, the recipe as it appears.

On a terminal one status line is rewritten in place (stage, percent, characters,
ETA); elsewhere (CI, a pipe) a plain line is printed only when the stage changes
or the progress moves by a tenth. The dish name and the ingredients are printed
once, as soon as the partial recipe has them, and each finished step once.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

#: A non-terminal prints a progress line only when the percentage moves this much.
PLAIN_STEP_PERCENT = 10


class JobWatch:
    """Feed it every polled job document; it prints what is new."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.live = self.out.isatty()
        self._state: tuple[Any, Any] | None = None
        self._percent_shown = -PLAIN_STEP_PERCENT
        self._named = False
        self._ingredients = False
        self._steps = 0
        self._line_open = False

    def __call__(self, doc: dict[str, Any]) -> None:
        state = (doc.get("status"), doc.get("stage"))
        if state != self._state:
            self._state = state
            self._print(f"status={state[0]} stage={state[1]}")
        partial = doc.get("partial") or {}
        if partial.get("name") and not self._named:
            self._named = True
            self._print(f"dish: {partial['name']}" + (f" - {partial['summary']}" if partial.get("summary") else ""))
        if partial.get("ingredients") and not self._ingredients:
            self._ingredients = True
            self._print("ingredients: " + _ingredients(partial["ingredients"]))
        for step in (partial.get("steps") or [])[self._steps :]:
            self._steps += 1
            self._print(f"step {step['order']}: {step['text']}")
        progress = doc.get("progress")
        if progress and doc.get("status") == "RUNNING" and doc.get("stage") == "recipe":
            self.progress(doc.get("stage"), progress)

    def close(self) -> None:
        if self._line_open:
            self.out.write("\n")
            self.out.flush()
            self._line_open = False

    def progress(self, stage: Any, p: dict[str, Any]) -> None:
        eta = f"ETA {p['etaMs'] / 1000:.0f} s" if p.get("etaMs") is not None else "ETA -"
        line = f"[chuixiang] {stage} {p['percent']:>3}% · {p['chars']} chars · {p['tokens']} tokens · {eta}"
        if self.live:
            self.out.write("\r\x1b[2K" + line)
            self.out.flush()
            self._line_open = True
        elif p["percent"] >= self._percent_shown + PLAIN_STEP_PERCENT:
            self._percent_shown = p["percent"]
            self._print(line.removeprefix("[chuixiang] "))

    def _print(self, text: str) -> None:
        self.close()
        print(f"[chuixiang] {text}", file=self.out, flush=True)


def _ingredients(groups: dict[str, Any]) -> str:
    items = [
        f"{i['name']} {i.get('amount', '')}".strip()
        for group in ("main", "auxiliary", "seasoning")
        for i in groups.get(group) or []
    ]
    return ", ".join(items)
