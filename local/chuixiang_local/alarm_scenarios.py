"""What pages, and when, for the traffic the on-call fears: jobs arriving at random, ending as the scenario says,
through the template's success alarms (:mod:`chuixiang_local.alarm_timeline`). ``chuixiang alarms --simulate``
prints the table ``docs/runbook.md`` quotes; ``tests/pipeline/test_alarm_week.py`` checks it.

A job publishes what the functions and Step Functions publish for it: ``ExecutionsSucceeded`` or
``ExecutionsFailed``, and ``RecipeSucceeded`` or ``RecipeFailed``. A model that is down fails every call; its
breaker opens after ``BreakerFailureThreshold`` failures in a row (``BreakerOpened``), refuses calls for
``BreakerRecoverySeconds``, then lets one probe through. Every run starts after three days of background traffic
(the ticket's window), so the windows hold a history as they would in production.

With the synthetic job on (``SyntheticSchedule``), a run every period (at a random phase) cooks a dish as users'
jobs end; a failed one is confirmed by a second job at once, and the run publishes ``SyntheticFailures`` (1 when
both failed). A job fails after :data:`FAIL_S` (a model that is down fails its call within the retry window) and
succeeds after :data:`COOK_S`.
"""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from stack_template import Template

from chuixiang.slo import TIERS
from chuixiang_local.alarm_rules import AlarmRules
from chuixiang_local.alarm_timeline import Notification, Series, Timeline

HOUR = 3600
#: Hours of background before a run starts: the longest window's (the ticket's 3 days).
HISTORY_H = max(tier.long.seconds for tier in TIERS) / HOUR
#: Jobs failing with nothing wrong: half the success objective's budget (1 %).
BACKGROUND = 0.005
#: The success alarms and the model outage they include.
ALARMS = (
    *(f"JobSuccessBurn{w.suffix}Alarm" for tier in TIERS for w in (tier.long, tier.short)),
    "JobSuccessBurnAlarm",
    "JobSuccessSlowBurnAlarm",
    "BreakerOpenAlarm",
    "RecipeFailureRateAlarm",
    "ModelOutageAlarm",
    "SyntheticFailingAlarm",
)
#: How long a synthetic job takes to fail (the retry window, 20 s, and the polls) and to succeed (a dish at peak).
FAIL_S, COOK_S = 30.0, 90.0

#: A job's ending at time t: None (succeeded), "failed" (any cause) or "down" (its model is down).
Outcome = Callable[[float, random.Random], str | None]


@dataclass(frozen=True)
class Scenario:
    name: str
    hours: float
    outcome: Outcome
    incident: tuple[float, float] | None = None  #: when the incident starts and ends (seconds), if it has one


def _background(t: float, rng: random.Random) -> str | None:
    return "failed" if rng.random() < BACKGROUND else None


def _outage(t: float, rng: random.Random) -> str | None:
    return "down" if HOUR <= t < 3 * HOUR else _background(t, rng)


def _five_percent(t: float, rng: random.Random) -> str | None:
    return "failed" if rng.random() < 0.05 else None


def _ten_percent(t: float, rng: random.Random) -> str | None:
    return "failed" if rng.random() < 0.10 else None


def _outage_then_trickle(t: float, rng: random.Random) -> str | None:
    """A model down for an hour, then 4 % of jobs failing (under the paging rate) for the next seven."""
    if HOUR <= t < 2 * HOUR:
        return "down"
    return "failed" if t >= 2 * HOUR and rng.random() < 0.04 else _background(t, rng)


SCENARIOS = {
    "quiet week": Scenario("quiet week", 7 * 24, _background),
    "model down 2 h": Scenario("model down 2 h", 6, _outage, (HOUR, 3 * HOUR)),
    "5 % failing 8 h": Scenario("5 % failing 8 h", 8, _five_percent, (0, 8 * HOUR)),
    # A slow burn over the page's rate (10x): it should page, once, within hours.
    "10 % failing 8 h": Scenario("10 % failing 8 h", 8, _ten_percent, (0, 8 * HOUR)),
    # The incident is the hour down; the seven hours of 4 % after it are the trickle that should page nobody.
    "down 1 h, then 4 % for 7 h": Scenario("down 1 h, then 4 % for 7 h", 9, _outage_then_trickle, (HOUR, 2 * HOUR)),
}


@dataclass(frozen=True)
class Breaker:
    threshold: int
    recovery_s: float


class _Model:
    """The model's breaker as the jobs' calls see it."""

    def __init__(self, breaker: Breaker, series: Series) -> None:
        self.breaker, self.series = breaker, series
        self.streak, self.open_until = 0, -float("inf")

    def job(self, t: float, outcome: str | None, ends: float | None = None) -> bool:
        """Publish a job started at ``t`` (ending at ``ends``, else at once) with ``outcome``; True if it succeeded."""
        succeeded, end = outcome is None, t if ends is None else ends
        self.series.add(end, "ExecutionsSucceeded" if succeeded else "ExecutionsFailed")
        self.series.add(end, "RecipeSucceeded" if succeeded else "RecipeFailed")
        if outcome != "down":
            self.streak = 0
        elif t >= self.open_until:  # a call (or the probe) reached the model, and failed
            self.streak += 1
            if self.streak >= self.breaker.threshold:
                self.series.add(t, "BreakerOpened")
                self.open_until = t + self.breaker.recovery_s
        return succeeded


def _arrivals(per_hour: float, synthetic_s: float | None, end: float, rng: random.Random) -> list[tuple[float, bool]]:
    """When jobs start, and which are the synthetic runs', from :data:`HISTORY_H` before 0 to ``end``."""
    found, t = [], -HISTORY_H * HOUR
    while (t := t + rng.expovariate(per_hour / HOUR)) <= end:
        found.append((t, False))
    if synthetic_s:
        t = -HISTORY_H * HOUR + rng.uniform(0, synthetic_s)
        while (t := t + synthetic_s) <= end:
            found.append((t, True))
    return sorted(found)


def traffic(
    per_hour: float, scenario: Scenario, seed: int, breaker: Breaker, synthetic_s: float | None = None
) -> Series:
    """The metrics a run publishes: :data:`HISTORY_H` of background before 0, then the scenario (and the synthetic job's
    runs every ``synthetic_s``)."""
    rng, series = random.Random(seed), Series()  # nosec B311
    model = _Model(breaker, series)

    def outcome(t: float) -> str | None:
        return scenario.outcome(t, rng) if t >= 0 else _background(t, rng)

    for t, synthetic in _arrivals(per_hour, synthetic_s, scenario.hours * HOUR, rng):
        if not synthetic:
            model.job(t, outcome(t))
            continue
        first = outcome(t)
        if model.job(t, first, t + (COOK_S if first is None else FAIL_S)):
            series.add(t + COOK_S, "SyntheticFailures", 0)
            continue
        again, confirmed_at = outcome(t + FAIL_S), t + FAIL_S
        ends = confirmed_at + (COOK_S if again is None else FAIL_S)
        series.add(ends, "SyntheticFailures", 0 if model.job(confirmed_at, again, ends) else 1)
    return series


@dataclass(frozen=True)
class Run:
    """One run's notifications, by topic."""

    pages: list[Notification]  #: ALARM notifications to AlarmTopic
    tickets: list[Notification]  #: ALARM notifications to TicketTopic
    oks: list[Notification]


def run(template: Template, per_hour: float, scenario: Scenario, seed: int, synthetic: bool = False) -> Run:
    """``synthetic``: with the synthetic job on its default schedule."""
    rules = AlarmRules(template)
    every = schedule_seconds(template.parameters["SyntheticSchedule"]) if synthetic else None
    series = traffic(per_hour, scenario, seed, _breaker(template), every)
    timeline = Timeline(rules, ALARMS)
    timeline.run(series, -3 * HOUR, 0)  # settle on the background first
    timeline.notifications.clear()
    sent = timeline.run(series, 0, int(scenario.hours * HOUR))
    return Run(
        pages=[n for n in sent if n.state == "ALARM" and "AlarmTopic" in n.topics],
        tickets=[n for n in sent if n.state == "ALARM" and "TicketTopic" in n.topics],
        oks=[n for n in sent if n.state == "OK"],
    )


_RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours)\)")


def schedule_seconds(expression: str) -> float:
    """A ``rate(…)`` schedule's period."""
    found = _RATE.fullmatch(expression)
    if not found:
        raise ValueError(f"not a rate expression in minutes or hours: {expression!r}")
    return int(found[1]) * (60 if found[2].startswith("minute") else HOUR)


def _breaker(template: Template) -> Breaker:
    parameters = template.parameters
    return Breaker(int(parameters["BreakerFailureThreshold"]), float(parameters["BreakerRecoverySeconds"]))


@dataclass(frozen=True)
class Summary:
    per_hour: float
    scenario: str
    synthetic: bool
    runs: int
    pages: tuple[float, int]  #: median and most
    tickets: tuple[float, int]
    oks_during: int  #: the most OK notifications of the page while its incident lasted (a page that came and went)
    pages_during: int  #: the most pages while the incident lasted (the rest came after it, from windows holding it)
    first_page_min: float | None  #: median minutes from the incident's start to the first page

    def row(self) -> str:
        first = "-" if self.first_page_min is None else f"{self.first_page_min:.0f}"
        return (
            f"| {self.scenario} | {self.per_hour:g} | {'on' if self.synthetic else 'off'} | {self.runs} | "
            f"{self.pages[0]:g} / {self.pages[1]} | "
            f"{self.tickets[0]:g} / {self.tickets[1]} | {self.oks_during} | {first} |"
        )


HEADER = (
    "| scenario | jobs/h | synthetic job | runs | pages (median / most) | tickets (median / most) "
    "| OKs while it lasts (most) | first page (median min after the start) |\n|---|---|---|---|---|---|---|---|"
)


def _spread(counts: list[int]) -> tuple[float, int]:
    return statistics.median(counts), max(counts)


def summarise(template: Template, per_hour: float, scenario: Scenario, seeds: range, synthetic: bool) -> Summary:
    runs = [run(template, per_hour, scenario, seed, synthetic) for seed in seeds]
    start, end = scenario.incident or (0.0, 0.0)
    firsts = [(r.pages[0].t - start) / 60 for r in runs if r.pages and scenario.incident is not None]
    return Summary(
        per_hour=per_hour,
        scenario=scenario.name,
        synthetic=synthetic,
        runs=len(runs),
        pages=_spread([len(r.pages) for r in runs]),
        tickets=_spread([len(r.tickets) for r in runs]),
        oks_during=max(sum(1 for n in r.oks if "AlarmTopic" in n.topics and start <= n.t < end) for r in runs),
        pages_during=max(sum(1 for n in r.pages if start <= n.t < end) for r in runs),
        first_page_min=statistics.median(firsts) if firsts else None,
    )


#: The table's runs: traffic levels (jobs an hour) and seeds per scenario (a week is 10,080 evaluations); the
#: synthetic job at the lowest level, where it matters.
RATES = (4, 12, 60)
SYNTHETIC_RATES = (4,)
SEEDS = {
    "quiet week": range(3),
    "model down 2 h": range(10),
    "5 % failing 8 h": range(10),
    "10 % failing 8 h": range(10),
    "down 1 h, then 4 % for 7 h": range(10),
}

Key = tuple[str, float, bool]


def summaries(template: Template) -> dict[Key, Summary]:
    """Every scenario at every traffic level, without and with the synthetic job, by (scenario, jobs an hour,
    synthetic)."""
    cases = [(rate, False) for rate in RATES] + [(rate, True) for rate in SYNTHETIC_RATES]
    return {
        (name, rate, synthetic): summarise(template, rate, SCENARIOS[name], SEEDS[name], synthetic)
        for name in SCENARIOS
        for rate, synthetic in cases
    }


def table(found: dict[Key, Summary]) -> str:
    return "\n".join([HEADER, *(summary.row() for summary in found.values())])
