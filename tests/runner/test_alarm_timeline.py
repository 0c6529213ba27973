"""The alarm evaluator over time does what CloudWatch documents (*Configuring how CloudWatch alarms treat missing
data*, composite alarms' action suppression), so the paging tests built on it (``test_alarm_week.py``) mean
something; and a model outage at 60 jobs an hour pages once, within minutes, until it is over."""

from __future__ import annotations

from typing import Any

import pytest
from stack_template import Template

from chuixiang_local.alarm_rules import AlarmRules
from chuixiang_local.alarm_scenarios import ALARMS, SCENARIOS, Breaker, run, traffic
from chuixiang_local.alarm_timeline import Series, Timeline


class _Template:
    """Just enough of a template: its resources, nothing to resolve."""

    def __init__(self, resources: dict[str, Any]) -> None:
        self.doc = {"Resources": resources}

    def resolve(self, value: Any) -> Any:
        return value


def _errors_alarm(treat: str = "notBreaching", periods: int = 1, needed: int | None = None) -> dict[str, Any]:
    props: dict[str, Any] = {
        "MetricName": "Errors",
        "Period": 60,
        "EvaluationPeriods": periods,
        "Threshold": 0,
        "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": treat,
        "AlarmActions": [{"Ref": "AlarmTopic"}],
        "OKActions": [{"Ref": "AlarmTopic"}],
    }
    if needed is not None:
        props["DatapointsToAlarm"] = needed
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": props}


def _states(resources: dict[str, Any], series: Series, minutes: range, alarm: str = "A") -> list[str]:
    timeline = Timeline(AlarmRules(_Template(resources)), resources)  # type: ignore[arg-type]
    out = []
    for minute in minutes:
        timeline.step(series, minute * 60)
        out.append(timeline.states[alarm])
    return out


def test_a_one_period_alarm_looks_back_before_it_treats_data_as_missing() -> None:
    """ "If some data points in the evaluation range are missing, but the number of existing data points
    retrieved is equal to or more than the alarm's Evaluation Periods, CloudWatch evaluates the alarm state
    based on the most recent existing data points" - one error keeps a 1-minute alarm in ALARM for the whole
    evaluation range (here EvaluationPeriods + 2), then notBreaching applies."""
    series = Series()
    series.add(30, "Errors")
    assert _states({"A": _errors_alarm()}, series, range(1, 6)) == ["ALARM", "ALARM", "ALARM", "OK", "OK"]


@pytest.mark.parametrize(
    ("treat", "after"), [("ignore", "ALARM"), ("missing", "INSUFFICIENT_DATA"), ("breaching", "ALARM")]
)
def test_with_no_data_in_range_the_missing_data_setting_decides(treat: str, after: str) -> None:
    series = Series()
    series.add(30, "Errors")
    assert _states({"A": _errors_alarm(treat)}, series, range(1, 8))[-1] == after


def test_m_out_of_n() -> None:
    series = Series()
    for t in (30, 150):  # errors in the 1st and 3rd minute: 2 of the last 3
        series.add(t, "Errors")
    assert _states({"A": _errors_alarm(periods=3, needed=2)}, series, range(3, 4)) == ["ALARM"]
    series = Series()
    series.add(30, "Errors")
    assert _states({"A": _errors_alarm(periods=3, needed=2)}, series, range(3, 4)) == ["OK"]


def _suppressed_page(wait: int, extension: int) -> dict[str, Any]:
    return {
        "A": _errors_alarm(),
        "B": {**_errors_alarm(), "Properties": {**_errors_alarm()["Properties"], "MetricName": "Cause"}},
        "C": {
            "Type": "AWS::CloudWatch::CompositeAlarm",
            "Properties": {
                "AlarmRule": {"Fn::Sub": 'ALARM("${A.Arn}")'},
                "AlarmActions": [{"Ref": "AlarmTopic"}],
                "OKActions": [{"Ref": "AlarmTopic"}],
                "ActionsSuppressor": {"Fn::GetAtt": ["B", "Arn"]},
                "ActionsSuppressorWaitPeriod": wait,
                "ActionsSuppressorExtensionPeriod": extension,
            },
        },
    }


def _composite_pages(resources: dict[str, Any], series: Series, minutes: int) -> list[int]:
    rules = AlarmRules(_Template(resources))  # type: ignore[arg-type]
    timeline = Timeline(rules, resources)
    timeline.run(series, 60, minutes * 60)
    return [int(n.t // 60) for n in timeline.notifications if n.alarm == "C" and n.state == "ALARM"]


def test_a_composite_waits_for_its_suppressor_then_pages() -> None:
    """ "ActionsSuppressorWaitPeriod: the maximum time … the composite alarm waits for the suppressor alarm to go
    into the ALARM state"; "ActionsSuppressorExtensionPeriod: … waits after suppressor alarm goes out of the
    ALARM state"."""
    symptom = Series()
    symptom.add(30, "Errors")
    assert _composite_pages(_suppressed_page(wait=120, extension=0), symptom, 3) == [3]  # waited 2 minutes
    cause_later = Series()
    cause_later.add(30, "Errors")
    cause_later.add(90, "Cause")  # the cause fires within the wait: its page, not this one
    assert _composite_pages(_suppressed_page(wait=120, extension=0), cause_later, 6) == []
    cause_before = Series()
    cause_before.add(30, "Cause")  # ALARM minutes 1-3, OK from minute 4
    cause_before.add(330, "Errors")  # the symptom at minute 6: within the 5-minute extension
    assert _composite_pages(_suppressed_page(wait=0, extension=300), cause_before, 10) == []
    assert _composite_pages(_suppressed_page(wait=0, extension=60), cause_before, 10) == [6]


def test_a_composite_still_in_alarm_when_its_suppression_ends_performs_its_actions() -> None:
    """API Reference, *CompositeAlarm*, ActionsSuppressedBy ExtensionPeriod: "the composite alarm is waiting after
    the suppressor alarm went out of the ALARM state. The maximum waiting time is as specified in
    ActionsSuppressorExtensionPeriod. After this time, the composite alarm performs its actions." Held, not
    dropped: the symptom outlasting its cause pages once the extension is over."""
    series = Series()
    series.add(30, "Cause")  # the cause in ALARM from minute 1, OK again at minute 4
    for minute in range(1, 12):
        series.add(minute * 60 - 30, "Errors")  # the symptom in ALARM all along
    pages = _composite_pages(_suppressed_page(wait=0, extension=120), series, 12)
    assert pages == [6], pages  # the cause left ALARM at minute 4; two minutes later the composite acts
    short = Series()
    short.add(30, "Cause")
    short.add(30, "Errors")  # the symptom over before the extension ends: no page
    assert _composite_pages(_suppressed_page(wait=0, extension=120), short, 12) == []


def test_metric_math_without_a_false_value_and_powers() -> None:
    alarm = {
        "Type": "AWS::CloudWatch::Alarm",
        "Properties": {
            "Metrics": [
                {"Id": "bad", "ReturnData": False, "MetricStat": {"Metric": {"MetricName": "Bad"}, "Period": 60}},
                {"Id": "out", "ReturnData": True, "Expression": "IF(bad >= 4, bad ^ 0.5)"},
            ],
            "EvaluationPeriods": 1,
            "Threshold": 1.9999999999,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        },
    }
    rules = AlarmRules(_Template({"X": alarm}))  # type: ignore[arg-type]
    assert rules.value("X", {"bad": 9.0}) == 3.0
    assert rules.value("X", {"bad": 3.0}) is None  # "an empty time series, if … scalar3/metric3 is omitted"
    assert rules.breaches_value("X", 2.0) and rules.breaches_value("X", 1.99999999999)  # equal in decimal


def test_a_model_down_at_60_jobs_an_hour_pages_once_within_minutes_until_it_is_back() -> None:
    scenario = SCENARIOS["model down 2 h"]
    start, end = scenario.incident or (0.0, 0.0)
    for seed in range(3):
        result = run(Template(), 60, scenario, seed)
        # After it ends the long windows hold it for hours: a lone background failure may page again then.
        [page] = [n for n in result.pages if n.t < end]
        assert start < page.t <= start + 15 * 60
        ok = min(n.t for n in result.oks if n.alarm == "JobSuccessBurnAlarm")
        # The OK once the outage has left the last hour (the 6x tier's short window): at 60 jobs an hour, when
        # fewer than seven of its failures are left in it.
        assert end + 30 * 60 < ok <= end + 60 * 60, (ok - end) / 60
        assert result.tickets == []  # the slow burn is held while the page is on, and 6 h after


@pytest.mark.parametrize(
    ("alarm", "metric", "every_s", "promised_s"),
    [("CanaryMissingAlarm", "CanaryProbes", 3600, 2 * 3600), ("SyntheticMissingAlarm", "SyntheticFailures", 300, 1800)],
)
def test_a_missing_run_alarm_fires_when_its_text_says(alarm: str, metric: str, every_s: int, promised_s: int) -> None:
    """Runs on schedule for 12 hours, then none: the alarm stays quiet while they run, and files its ticket as
    long after the last run as its AlarmDescription promises ("for two hours", "for 30 minutes"), give or take a
    minute of evaluation."""
    template = Template({"CanaryModels": "m"})
    said = {3600 * 2: "for two hours", 1800: "for 30 minutes"}[promised_s]
    assert said in template.doc["Resources"][alarm]["Properties"]["AlarmDescription"]
    series, last = Series(), 0.0
    for k in range(12 * 3600 // every_s + 1):
        last = 1800 + k * every_s
        series.add(last, metric)
    timeline = Timeline(AlarmRules(template), [alarm])
    timeline.run(series, 0, last + 3 * promised_s)
    fired = [n.t - last for n in timeline.notifications if n.state == "ALARM" and n.t > 3600]
    assert fired and promised_s <= fired[0] <= promised_s + 120, [f / 60 for f in fired]


class _EveryMinute(Timeline):
    """The evaluator without its skip: every metric alarm evaluated at every minute."""

    def _may_have_changed(self, alarm: str, series: Series, now: float) -> bool:
        return True


@pytest.mark.parametrize(
    ("name", "per_hour", "seed"), [("model down 2 h", 60, 1), ("down 1 h, then 4 % for 7 h", 12, 2)]
)
def test_skipping_the_minutes_nothing_entered_or_left_changes_nothing(name: str, per_hour: int, seed: int) -> None:
    """The evaluator evaluates a metric alarm only at the minutes a data point enters or leaves its evaluation
    range: what pages, and every state at every minute, are those of evaluating every alarm every minute."""
    rules = AlarmRules(Template())
    scenario = SCENARIOS[name]
    series = traffic(per_hour, scenario, seed, Breaker(3, 60))
    skipping, every = Timeline(rules, ALARMS), _EveryMinute(rules, ALARMS)
    minute = -6 * 3600
    while minute <= scenario.hours * 3600:
        skipping.step(series, minute)
        every.step(series, minute)
        assert skipping.states == every.states, minute
        minute += 60
    assert skipping.notifications == every.notifications
    assert skipping.notifications, "a scenario that pages"
