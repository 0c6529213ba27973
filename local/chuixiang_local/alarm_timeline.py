"""The template's alarms over hours and days, evaluated minute by minute as CloudWatch evaluates them, so
what pages (and how often) is tested against traffic, not one period at a time.

What CloudWatch documents, and this does (*Using Amazon CloudWatch alarms*, *Configuring how CloudWatch alarms
treat missing data*):

* every alarm is evaluated each minute, over periods that end at that minute;
* "CloudWatch attempts to retrieve a higher number of data points than specified by Evaluation Periods" (the
  *evaluation range*; its example retrieves 5 for 3: here ``EvaluationPeriods + 2``). With at least
  ``EvaluationPeriods`` existing points among them, the most recent existing ones are evaluated and the
  missing-data setting is ignored: a 1-period alarm whose latest period has no data looks back to the last
  one that had. Only with fewer are missing points filled (``notBreaching``/``breaching``); with none at all,
  ``ignore`` keeps the alarm's state and ``missing`` makes it INSUFFICIENT_DATA;
* ``DatapointsToAlarm`` of ``EvaluationPeriods`` breaching: ALARM, else OK;
* a composite alarm's state is its rule over the other alarms' states; its ``ActionsSuppressor`` holds its
  actions while the suppressor is in ALARM, for ``ActionsSuppressorWaitPeriod`` seconds after the composite
  enters ALARM (waiting for the suppressor) and ``ActionsSuppressorExtensionPeriod`` after the suppressor leaves.
  Held is not dropped: CloudWatch API Reference, *CompositeAlarm*, ``ActionsSuppressedBy``: "the composite alarm
  is waiting after the suppressor alarm went out of the ALARM state. The maximum waiting time is as specified in
  ActionsSuppressorExtensionPeriod. After this time, the composite alarm performs its actions" - a composite
  still in ALARM then notifies.

Each period's figures are the sums of what :class:`Series` holds for each metric (a ``SELECT SUM(x)`` query
reads ``x``); a period without a data point is missing, as a count of zero is for Step Functions' metrics.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from chuixiang_local.alarm_rules import AlarmRules

#: How many more periods than ``EvaluationPeriods`` an evaluation retrieves (the documented example's 5 for 3).
EXTRA_RANGE = 2
_SELECT = re.compile(r"SELECT SUM\((\w+)\) FROM")


class Series:
    """Data points by metric name: ``add(t, name)``, then :meth:`window` sums ``(start, end]``."""

    def __init__(self) -> None:
        self._points: dict[str, list[tuple[float, float]]] = {}
        self._index: dict[str, tuple[list[float], list[float]]] = {}

    def add(self, t: float, name: str, value: float = 1.0) -> None:
        self._points.setdefault(name, []).append((t, value))
        self._index.pop(name, None)

    def window(self, name: str, start: float, end: float) -> float | None:
        times, sums = self._indexed(name)
        lo, hi = bisect.bisect_right(times, start), bisect.bisect_right(times, end)
        return sums[hi] - sums[lo] if hi > lo else None

    def times(self, name: str) -> list[float]:
        """When ``name`` has data points, in order."""
        return self._indexed(name)[0]

    def _indexed(self, name: str) -> tuple[list[float], list[float]]:
        if name not in self._index:
            points = sorted(self._points.get(name, []))
            self._index[name] = ([t for t, _ in points], [0.0, *accumulate(v for _, v in points)])
        return self._index[name]


@dataclass(frozen=True)
class Notification:
    t: float
    alarm: str
    state: str  #: ALARM or OK
    topics: tuple[str, ...]  #: the topics' logical ids (AlarmTopic pages, TicketTopic files a ticket)


@dataclass
class _Composite:
    state: str = "OK"
    pending_until: float | None = None  #: entered ALARM, waiting for its suppressor until then
    notified_alarm: bool = False


@dataclass
class Timeline:
    """``Timeline(rules, alarms).run(series, start, end)``: every notification the ``alarms`` (logical ids,
    metric and composite) send between ``start`` and ``end`` (seconds). Alarms outside the list are OK."""

    rules: AlarmRules
    alarms: Iterable[str]
    states: dict[str, str] = field(default_factory=dict)
    notifications: list[Notification] = field(default_factory=list)
    _suppressor_left: dict[str, float] = field(default_factory=dict)
    _composites: dict[str, _Composite] = field(default_factory=dict)
    #: Each alarm's value for a period of the series last read, by (alarm, period end): an evaluation range
    #: reads the same periods again at each of the next minutes (``EvaluationPeriods + 2`` times).
    _values: dict[tuple[str, float], float | None] = field(default_factory=dict)
    _values_of: Series | None = None
    #: When each metric alarm's evaluation range of the series last read changes (a data point enters one of its
    #: periods or leaves them), in order, and when the alarm was last evaluated: between two changes its state is
    #: what it was, so the minutes in between are not evaluated again (a quiet night is one evaluation).
    _changes: dict[str, list[float]] = field(default_factory=dict)
    _evaluated: dict[str, float] = field(default_factory=dict)
    _sources_of: dict[str, dict[str, str]] = field(default_factory=dict)
    _composites_read: bool = False  #: the composites were evaluated once (their rules may hold with every part OK)
    #: Each metric alarm's first alarm with the same metrics and math (an hour-long window of one tier and of the
    #: next, say): their values for a period are one, computed once.
    _same_as: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.alarms = list(self.alarms)
        first: dict[str, str] = {}
        for alarm in self.alarms:
            self.states[alarm] = "OK"
            if self._type(alarm) == "AWS::CloudWatch::CompositeAlarm":
                self._composites[alarm] = _Composite()
            else:
                self._same_as[alarm] = first.setdefault(_what_is_measured(self._props(alarm)), alarm)

    def run(self, series: Series, start: float, end: float) -> list[Notification]:
        now = start
        while now <= end:
            self.step(series, now)
            now += 60
        return self.notifications

    def step(self, series: Series, now: float) -> None:
        self._read(series)
        changed = False
        for alarm in self.alarms:
            if alarm not in self._composites and self._may_have_changed(alarm, series, now):
                self._evaluated[alarm] = now
                changed |= self._transition(alarm, self._metric_state(alarm, series, now), now)
        if self._composites_read and not changed and all(c.pending_until is None for c in self._composites.values()):
            return  # no composite's rule reads another state than it did, and none waits to notify
        self._composites_read = True
        for alarm in self._ordered_composites():
            in_alarm = {name: self.states.get(name) == "ALARM" for name in self.rules.parts(alarm)}
            self._transition(alarm, "ALARM" if self.rules.composite(alarm, in_alarm) else "OK", now)
            self._release_pending(alarm, now)

    # --- metric alarms --------------------------------------------------------------------

    def _read(self, series: Series) -> None:
        """What was computed from another series is dropped (a series is only ever added to before it is read)."""
        if series is not self._values_of:
            self._values, self._changes, self._evaluated, self._values_of = {}, {}, {}, series

    def _may_have_changed(self, alarm: str, series: Series, now: float) -> bool:
        """Whether a data point entered or left one of the alarm's periods since it was last evaluated. Period
        ``k`` ends ``k`` periods before ``now``: a point at ``t`` is in it from ``now = t + k * period`` on."""
        last = self._evaluated.get(alarm)
        if last is None:
            return True
        if alarm not in self._changes:
            props = self._props(alarm)
            period, kept = _period(props), int(props["EvaluationPeriods"]) + EXTRA_RANGE
            points = sorted(t for name in set(self._sources(alarm).values()) for t in series.times(name))
            changes: list[float] = []
            for k in range(kept + 1):  # each shift a sorted run, which the sort merges (not ten million items sorted)
                offset = k * period
                changes += [t + offset for t in points]
            changes.sort()
            self._changes[alarm] = changes
        changes = self._changes[alarm]
        return bisect.bisect_right(changes, last) < bisect.bisect_right(changes, now)

    def _metric_state(self, alarm: str, series: Series, now: float) -> str:
        props = self._props(alarm)
        periods, period = int(props["EvaluationPeriods"]), _period(props)
        needed = int(props.get("DatapointsToAlarm", periods))
        # The most recent existing points, newest first, and no more than are evaluated: a period further back is
        # read only while fewer have data (at 60 jobs an hour, rarely).
        existing: list[bool] = []
        for k in range(periods + EXTRA_RANGE):
            value = self._value(alarm, props, series, now - k * period, period)
            if value is not None:
                existing.append(self.rules.breaches_value(alarm, value))
                if len(existing) == periods:
                    break
        treat = props.get("TreatMissingData", "missing")
        if not existing and treat in ("ignore", "missing"):
            return self.states[alarm] if treat == "ignore" else "INSUFFICIENT_DATA"
        if len(existing) < periods:
            if treat not in ("breaching", "notBreaching"):
                raise ValueError(f"{alarm}: TreatMissingData {treat} with some points missing is not modelled")
            existing += [treat == "breaching"] * (periods - len(existing))
        return "ALARM" if sum(existing) >= needed else "OK"

    def _value(self, alarm: str, props: Mapping[str, Any], series: Series, end: float, period: int) -> float | None:
        key = (self._same_as[alarm], end)
        if key not in self._values:
            figures = {i: series.window(name, end - period, end) for i, name in self._sources(alarm).items()}
            self._values[key] = self.rules.value(alarm, figures)
        return self._values[key]

    # --- transitions and actions ----------------------------------------------------------

    def _transition(self, alarm: str, state: str, now: float) -> bool:
        """Whether the alarm changed state."""
        before = self.states[alarm]
        self.states[alarm] = state
        if state == before:
            return False
        if alarm in self._suppressing() and before == "ALARM":
            self._suppressor_left[alarm] = now
        composite = self._composites.get(alarm)
        if composite is None:
            self._notify(alarm, state, now)
            return True
        composite.state = state
        if state == "ALARM":
            composite.pending_until = now + float(self._props(alarm).get("ActionsSuppressorWaitPeriod", 0))
        else:
            composite.pending_until = None
            if composite.notified_alarm and not self._suppressed(alarm, now):
                self._notify(alarm, "OK", now)
            composite.notified_alarm = False
        return True

    def _release_pending(self, alarm: str, now: float) -> None:
        """A composite in ALARM whose actions are held performs them once nothing holds them: the suppressor is
        out of ALARM and past its extension, and the wait for it has passed (or it came and went)."""
        composite = self._composites[alarm]
        if composite.pending_until is None or composite.state != "ALARM":
            return
        if self._suppressed(alarm, now):
            composite.pending_until = min(composite.pending_until, now)  # it came: no more waiting for it
            return
        if now >= composite.pending_until:
            composite.pending_until = None
            composite.notified_alarm = True
            self._notify(alarm, "ALARM", now)

    def _suppressed(self, alarm: str, now: float) -> bool:
        props = self._props(alarm)
        suppressor = _logical_id(props.get("ActionsSuppressor"))
        if suppressor is None:
            return False
        if self.states.get(suppressor) == "ALARM":
            return True
        left = self._suppressor_left.get(suppressor)
        return left is not None and now < left + float(props.get("ActionsSuppressorExtensionPeriod", 0))

    def _notify(self, alarm: str, state: str, now: float) -> None:
        key = "AlarmActions" if state == "ALARM" else "OKActions"
        topics = tuple(t for t in (_logical_id(a) for a in self._props(alarm).get(key, [])) if t)
        if topics:
            self.notifications.append(Notification(now, alarm, state, topics))

    # --- the template -----------------------------------------------------------------------

    def _props(self, alarm: str) -> dict[str, Any]:
        props: dict[str, Any] = self.rules.resources[alarm]["Properties"]
        return props

    def _sources(self, alarm: str) -> dict[str, str]:
        """Each metric id's metric name, read from the template once."""
        if alarm not in self._sources_of:
            self._sources_of[alarm] = _sources(self._props(alarm))
        return self._sources_of[alarm]

    def _type(self, alarm: str) -> str:
        return str(self.rules.resources[alarm]["Type"])

    def _suppressing(self) -> set[str]:
        return {s for a in self._composites if (s := _logical_id(self._props(a).get("ActionsSuppressor")))}

    def _ordered_composites(self) -> list[str]:
        """Composites after the composites their rules and suppressors name."""
        done: list[str] = []

        def visit(alarm: str) -> None:
            if alarm in done:
                return
            suppressor = _logical_id(self._props(alarm).get("ActionsSuppressor"))
            for part in [*self.rules.parts(alarm), *([suppressor] if suppressor else [])]:
                if part in self._composites:
                    visit(part)
            done.append(alarm)

        for alarm in self._composites:
            visit(alarm)
        return done


def _period(props: Mapping[str, Any]) -> int:
    if "Period" in props:
        return int(props["Period"])
    for metric in props["Metrics"]:
        if "MetricStat" in metric:
            return int(metric["MetricStat"]["Period"])
        if "Period" in metric:
            return int(metric["Period"])
    raise ValueError("an alarm without a period")


_MEASURED = ("Metrics", "MetricName", "Namespace", "Dimensions", "Statistic", "ExtendedStatistic", "Period")


def _what_is_measured(props: Mapping[str, Any]) -> str:
    """What decides an alarm's value for a period (not its threshold or its evaluation): its metrics and math."""
    return json.dumps({k: props.get(k) for k in _MEASURED}, sort_keys=True, default=str)


def _sources(props: Mapping[str, Any]) -> dict[str, str]:
    """Each metric id's metric name (a single-metric alarm's id is its metric name); math reads no series."""
    if "MetricName" in props:
        return {props["MetricName"]: props["MetricName"]}
    sources: dict[str, str] = {}
    for metric in props["Metrics"]:
        if "MetricStat" in metric:
            sources[metric["Id"]] = metric["MetricStat"]["Metric"]["MetricName"]
        elif (query := _SELECT.match(str(metric.get("Expression", "")))) is not None:
            sources[metric["Id"]] = query.group(1)
    return sources


def _logical_id(value: Any) -> str | None:
    """``!Ref X`` or ``!GetAtt X.Arn``: ``X``."""
    if isinstance(value, Mapping):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            return str(target[0] if isinstance(target, list) else str(target).split(".")[0])
    return None
