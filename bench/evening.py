"""An evening at 1,000 and 10,000 users, simulated against the quotas (a discrete-event simulation: arrivals
through 17:00-21:00, the jobs `chuixiang bench --sections` measured at the peak). Prints the tables that
docs/capacity.md shows (`make docs` writes them there; a test checks they are current). Runs in ~15 s.

    .venv/bin/python bench/evening.py
"""

from __future__ import annotations

import time

from chuixiang_local.evening.report import SCENARIOS, markdown, run


def main() -> None:
    started = time.monotonic()
    for scenario in SCENARIOS:
        print(markdown(scenario, run(scenario)), end="\n\n")
    print(f"({len(SCENARIOS) * 3} evenings in {time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
