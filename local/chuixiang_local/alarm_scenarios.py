"""What pages, and when, for the traffic the on-call fears: jobs arriving at random, ending as the scenario says,
through the template's success alarms (:mod:`chuixiang_local.alarm_timeline`). ``chuixiang alarms --simulate``
prints the table ``docs/runbook.md`` quotes; ``tests/pipeline/test_alarm_week.py`` checks it.

A job publishes what the functions and Step Functions publish for it: ``ExecutionsSucceeded`` or
``ExecutionsFailed``, and ``RecipeSucceeded`` or ``RecipeFailed``. A model that is down fails every call; its
breaker opens after ``BreakerFailureThreshold`` failures in a row (``BreakerOpened``), refuses calls for
``BreakerRecoverySeconds``, then lets one probe through. Every run starts after a day of background traffic,
so the windows hold a history as they would in production.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from chuixiang_local.alarm_rules import AlarmRules
from chuixiang_local.alarm_timeline import Notification, Series, Timeline
from chuixiang_local.template import Template

HOUR = 3600
#: Jobs failing with nothing wrong: half the success objective's budget (1 %).
BACKGROUND = 0.005
#: The success alarms and the model outage they include.
ALARMS = (
    *(f"JobSuccessBurn{w}Alarm" for w in ("1h", "5m", "6h", "30m", "24h", "2h")),
    "JobSuccessBurnAlarm",
    "JobSuccessSlowBurnAlarm",
    "BreakerOpenAlarm",
    "RecipeFailureRateAlarm",
    "ModelOutageAlarm",
)

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


SCENARIOS = {
    "quiet week": Scenario("quiet week", 7 * 24, _background),
    "model down 2 h": Scenario("model down 2 h", 6, _outage, (HOUR, 3 * HOUR)),
    "5 % failing 8 h": Scenario("5 % failing 8 h", 8, _five_percent, (0, 8 * HOUR)),
}


@dataclass(frozen=True)
class Breaker:
    threshold: int
    recovery_s: float


def traffic(per_hour: float, scenario: Scenario, seed: int, breaker: Breaker) -> Series:
    """The metrics a run publishes: a day of background before 0, then the scenario."""
    rng, series = random.Random(seed), Series()  # nosec B311
    t, streak, open_until = -24.0 * HOUR, 0, -float("inf")
    while (t := t + rng.expovariate(per_hour / HOUR)) <= scenario.hours * HOUR:
        outcome = scenario.outcome(t, rng) if t >= 0 else _background(t, rng)
        succeeded = outcome is None
        series.add(t, "ExecutionsSucceeded" if succeeded else "ExecutionsFailed")
        series.add(t, "RecipeSucceeded" if succeeded else "RecipeFailed")
        if outcome != "down":
            streak = 0
        elif t >= open_until:  # a call (or the probe) reached the model, and failed
            streak += 1
            if streak >= breaker.threshold:
                series.add(t, "BreakerOpened")
                open_until = t + breaker.recovery_s
    return series


@dataclass(frozen=True)
class Run:
    """One run's notifications, by topic."""

    pages: list[Notification]  #: ALARM notifications to AlarmTopic
    tickets: list[Notification]  #: ALARM notifications to TicketTopic
    oks: list[Notification]


def run(template: Template, per_hour: float, scenario: Scenario, seed: int) -> Run:
    rules = AlarmRules(template)
    series = traffic(per_hour, scenario, seed, _breaker(template))
    timeline = Timeline(rules, ALARMS)
    timeline.run(series, -3 * HOUR, 0)  # settle on the background first
    timeline.notifications.clear()
    sent = timeline.run(series, 0, int(scenario.hours * HOUR))
    return Run(
        pages=[n for n in sent if n.state == "ALARM" and "AlarmTopic" in n.topics],
        tickets=[n for n in sent if n.state == "ALARM" and "TicketTopic" in n.topics],
        oks=[n for n in sent if n.state == "OK"],
    )


def _breaker(template: Template) -> Breaker:
    parameters = template.parameters
    return Breaker(int(parameters["BreakerFailureThreshold"]), float(parameters["BreakerRecoverySeconds"]))


@dataclass(frozen=True)
class Summary:
    per_hour: float
    scenario: str
    runs: int
    pages: tuple[float, int]  #: median and most
    tickets: tuple[float, int]
    oks_during: int  #: the most OK notifications of the page while its incident lasted (a page that came and went)
    first_page_min: float | None  #: median minutes from the incident's start to the first page

    def row(self) -> str:
        first = "-" if self.first_page_min is None else f"{self.first_page_min:.0f}"
        return (
            f"| {self.scenario} | {self.per_hour:g} | {self.runs} | {self.pages[0]:g} / {self.pages[1]} | "
            f"{self.tickets[0]:g} / {self.tickets[1]} | {self.oks_during} | {first} |"
        )


HEADER = (
    "| scenario | jobs/h | runs | pages (median / most) | tickets (median / most) | OKs while it lasts (most) "
    "| first page (median min after the start) |\n|---|---|---|---|---|---|---|"
)


def _spread(counts: list[int]) -> tuple[float, int]:
    return statistics.median(counts), max(counts)


def summarise(template: Template, per_hour: float, scenario: Scenario, seeds: range) -> Summary:
    runs = [run(template, per_hour, scenario, seed) for seed in seeds]
    start, end = scenario.incident or (0.0, 0.0)
    firsts = [(r.pages[0].t - start) / 60 for r in runs if r.pages and scenario.incident is not None]
    return Summary(
        per_hour=per_hour,
        scenario=scenario.name,
        runs=len(runs),
        pages=_spread([len(r.pages) for r in runs]),
        tickets=_spread([len(r.tickets) for r in runs]),
        oks_during=max(sum(1 for n in r.oks if "AlarmTopic" in n.topics and start <= n.t < end) for r in runs),
        first_page_min=statistics.median(firsts) if firsts else None,
    )


#: The table's runs: traffic levels (jobs an hour) and seeds per scenario (a week is 10,080 evaluations).
RATES = (4, 12, 60)
SEEDS = {"quiet week": range(3), "model down 2 h": range(10), "5 % failing 8 h": range(10)}


def summaries(template: Template) -> dict[tuple[str, float], Summary]:
    """Every scenario at every traffic level, by (scenario, jobs an hour)."""
    return {
        (name, rate): summarise(template, rate, SCENARIOS[name], SEEDS[name]) for name in SCENARIOS for rate in RATES
    }


def table(found: dict[tuple[str, float], Summary]) -> str:
    return "\n".join([HEADER, *(summary.row() for summary in found.values())])
