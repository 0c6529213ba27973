"""The bench chart: per model, every call's first content, longest gap and total time against the
first-content, idle and total limits, and the valid rate - readable at a glance. Imported only when a
chart is written (matplotlib is slow to load)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chuixiang_local.commands.charts import pyplot

if TYPE_CHECKING:
    from chuixiang_local.commands.bench import BenchCall

LIMIT_STYLES = {"first content": ("tab:orange", "--"), "idle": ("tab:gray", ":"), "total": ("tab:red", "-.")}


def draw(path: Path, rows: Sequence[dict[str, Any]], calls: Sequence[BenchCall], limits_ms: dict[str, float]) -> None:
    plt = pyplot()

    models = [r["model"] for r in rows]
    fig, (times, valid) = plt.subplots(
        1, 2, figsize=(12, 0.6 * len(models) + 3), sharey=True, gridspec_kw={"width_ratios": [4, 1]}
    )
    for i, model in enumerate(models):
        mine = [c for c in calls if c.model == model]
        jitter = [(k - (len(mine) - 1) / 2) * 0.08 for k in range(len(mine))]
        first = [
            (c.firstContentMs / 1000, i + j) for c, j in zip(mine, jitter, strict=True) if c.firstContentMs is not None
        ]
        total = [(c.totalMs / 1000, i + j, c.valid) for c, j in zip(mine, jitter, strict=True)]
        gaps = [(c.maxGapMs / 1000, i + j) for c, j in zip(mine, jitter, strict=True) if c.maxGapMs is not None]
        if gaps:
            times.scatter(
                [x for x, _ in gaps],
                [y for _, y in gaps],
                marker="^",
                color="tab:gray",
                label="longest gap (vs idle)" if i == 0 else None,
                zorder=3,
            )
        if first:
            times.scatter(
                [x for x, _ in first],
                [y for _, y in first],
                marker="o",
                color="tab:blue",
                label="first content" if i == 0 else None,
                zorder=3,
            )
        times.scatter(
            [x for x, _, ok in total if ok],
            [y for _, y, ok in total if ok],
            marker="s",
            color="tab:green",
            label="total (valid)" if i == 0 else None,
            zorder=3,
        )
        times.scatter(
            [x for x, _, ok in total if not ok],
            [y for _, y, ok in total if not ok],
            marker="x",
            color="tab:red",
            s=60,
            label="total (failed)" if i == 0 else None,
            zorder=3,
        )
    for name, ms in limits_ms.items():
        color, style = LIMIT_STYLES[name]
        times.axvline(ms / 1000, color=color, linestyle=style, label=f"{name} limit {ms / 1000:g} s")
    times.set_yticks(range(len(models)), models)
    times.invert_yaxis()
    times.set_xlabel("seconds from the request")
    times.set_title("every call: first content, longest gap, total time")
    times.grid(axis="x", alpha=0.3)
    times.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4, fontsize="small")

    rates = [r["valid"] / r["runs"] if r["runs"] else 0 for r in rows]
    valid.barh(
        range(len(models)), rates, color=["tab:green" if v == 1 else "tab:orange" if v else "tab:red" for v in rates]
    )
    for i, r in enumerate(rows):
        valid.text(0.02, i, f"{r['valid']}/{r['runs']}", va="center")
    valid.set_xlim(0, 1)
    valid.set_xlabel("valid rate")
    valid.set_title("valid recipes")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
