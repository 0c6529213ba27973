"""The evening's scenarios and their tables (``bench/evening.py``; ``make docs`` writes them into
docs/capacity.md and a test checks them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stack_template import Template

from chuixiang_local.commands.cost import Assumptions
from chuixiang_local.evening.profile import measured_jobs
from chuixiang_local.evening.quotas import AWS_REGIONS, PROVIDERS
from chuixiang_local.evening.sim import Evening, Stack

MODES = ("whole", "parallel", "auto")


@dataclass(frozen=True)
class Scenario:
    users: int
    provider: str
    overrides: tuple[tuple[str, str], ...] = ()
    region: str = "us-east-1"

    @property
    def title(self) -> str:
        stack = ", ".join(f"{k}={v}" for k, v in self.overrides) or "the template's defaults"
        return f"{self.users:,} users, {stack}, {PROVIDERS[self.provider].name}"


#: The defaults at 1,000 and 10,000 users, then RecipeConcurrency raised to see what binds next, on both keys; then
#: the keys a new team starts with, capped on requests at once (Moonshot's tiers 0 and 1), their cap stated.
SCENARIOS = (
    Scenario(1000, "qwen-plus"),
    Scenario(10_000, "qwen-plus"),
    Scenario(10_000, "qwen-plus", (("RecipeConcurrency", "1000"),)),
    Scenario(10_000, "gpt-4o-mini-tier1", (("RecipeConcurrency", "1000"),)),
    Scenario(1000, "moonshot-tier1", (("RecipeKeyStreams", "50"),)),
    Scenario(100, "moonshot-tier0", (("RecipeKeyStreams", "1"),)),
)


def run(scenario: Scenario, seed: int = 1) -> list[dict[str, Any]]:
    """Each mode's evening of ``scenario`` (the same arrivals for each: one seed)."""
    jobs, template = measured_jobs(), Template(dict(scenario.overrides))
    provider, aws = PROVIDERS[scenario.provider], AWS_REGIONS[scenario.region]
    return [
        Evening(scenario.users, Stack.of(template, mode), provider, aws, jobs, seed).run().summary(Assumptions())
        for mode in MODES
    ]


def markdown(scenario: Scenario, rows: list[dict[str, Any]]) -> str:
    provider = PROVIDERS[scenario.provider]
    aws = AWS_REGIONS[scenario.region]
    lines = [
        f"**{scenario.title}** (limits {provider.rpm:,} RPM, {provider.tpm:,} TPM{_streams(provider.streams)}; "
        f"Lambda {aws.lambda_concurrency:,})",
        "",
        "| mode | served | failed | gave up | wait p50 / p95 | refused (where) | in sections | peak streams | "
        "peak RPM | peak TPM | peak Lambda | transitions/s | WCU/s | $ / 1,000 jobs |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['outcomes'].get('served', 0):,} | {_failed(r):,} | "
            f"{r['outcomes'].get('gave up', 0):,} | "
            f"{_s(r['waitS']['p50'])} / {_s(r['waitS']['p95'])} | {_refused(r)} | {r['sectionsJobs']:,} | "
            f"{r['peak']['streams']:g} | {r['peak']['rpm']:,} | {r['peak']['tpm']:,} | {r['peak']['lambda']:g} | "
            f"{r['peak']['transitionsPerS']} | {r['peak']['wcuPerS']:,} | {r['usdPer1000Jobs']:.2f} |"
        )
    return "\n".join(lines)


def _failed(r: dict[str, Any]) -> int:
    return sum(n for outcome, n in r["outcomes"].items() if outcome.startswith("failed"))


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f} s"


def _refused(r: dict[str, Any]) -> str:
    where = {
        "admission 429": r["admission429"],
        "StartExecution 503": r["startExecution503"],
        "Lambda throttled": r["lambdaThrottles"],
        **{f"provider {k.upper()}": v for k, v in r["providerRefused"].items()},
    }
    found = [f"{n:,} {name}" for name, n in where.items() if n]
    fell = f"; {r['fellBackToWhole']:,} written whole after" if r["fellBackToWhole"] else ""
    waited = f"; {r['waitedOut']:,} waited out" if r["waitedOut"] else ""
    return (", ".join(found) or "none") + fell + waited


def _streams(streams: int | None) -> str:
    return f", {streams:,} requests at once" if streams is not None else ""


def tables() -> str:
    """Every scenario's table, as docs/capacity.md shows them."""
    return "\n\n".join(markdown(s, run(s)) for s in SCENARIOS)
