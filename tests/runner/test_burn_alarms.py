"""The burn-rate alarms are declared once (``chuixiang.slo``): the observability template holds exactly
what the table renders, and the dashboard's alarm widget lists every alarm, pages first. ``make alarms``
rewrites both."""

from __future__ import annotations

import json
import re

from stack_template import Template

from chuixiang import slo
from chuixiang_local import burn_alarms

from ..support.template_doc import RESOURCES

TEXT = burn_alarms.TEMPLATE.read_text()


def test_the_template_holds_what_the_table_renders() -> None:
    assert burn_alarms.current(TEXT) == burn_alarms.render(), "stale: run `make alarms`"


def test_every_alarm_the_table_declares_is_in_the_template_once() -> None:
    names = burn_alarms.alarm_names()
    assert len(names) == len(set(names)) == 3 * (2 + 2 * len(slo.TIERS))
    for name in names:
        assert RESOURCES[name]["Type"] in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
        assert TEXT.count(f"\n  {name}:\n") == 1


def test_the_alarm_widget_lists_pages_then_tickets_then_parts() -> None:
    template = Template()
    doc = json.loads(template.resolve(RESOURCES["Dashboard"]["Properties"]["DashboardBody"]))
    [widget] = [w for w in doc["widgets"] if w["type"] == "alarm"]
    arn_to_name = {template.physical[name]["Arn"]: name for name in RESOURCES if "Alarm" in RESOURCES[name]["Type"]}
    listed = [arn_to_name[arn] for arn in widget["properties"]["alarms"]]
    assert listed == burn_alarms.widget_alarms(RESOURCES) + [n for n in listed if RESOURCES[n].get("Condition")]


def test_pages_go_to_the_alarm_topic_and_slow_burns_to_tickets() -> None:
    for objective in slo.OBJECTIVES:
        page = RESOURCES[f"{objective.name}BurnAlarm"]["Properties"]
        ticket = RESOURCES[f"{objective.name}SlowBurnAlarm"]["Properties"]
        assert page["AlarmActions"] == [{"Ref": "AlarmTopic"}] and ticket["AlarmActions"] == [{"Ref": "TicketTopic"}]
        # The ticket is held while the page is on, and while its short window still holds that incident.
        assert ticket["ActionsSuppressor"] == {"Fn::GetAtt": [f"{objective.name}BurnAlarm", "Arn"]}
        assert ticket["ActionsSuppressorExtensionPeriod"] == slo.TIERS[-1].short.seconds
        for tier in slo.TIERS:
            for window in (tier.long, tier.short):
                props = RESOURCES[f"{objective.name}Burn{window.suffix}Alarm"]["Properties"]
                assert "AlarmActions" not in props  # a part never notifies alone
                assert {m["MetricStat"]["Period"] for m in props["Metrics"] if "MetricStat" in m} == {window.seconds}


def test_no_alarm_looks_back_further_than_cloudwatch_allows() -> None:
    """ "An alarm's total current evaluation period can be no longer than seven days, so Period multiplied by
    EvaluationPeriods can't be more than 604,800 seconds. For alarms with a period of less than one hour (3,600
    seconds), the total evaluation period can't be longer than one day (86,400 seconds)." (CloudWatch API
    reference, PutMetricAlarm, ``Period``); "Valid values are 10, 20, 30, and any multiple of 60"."""
    longest = 0
    for name, resource in RESOURCES.items():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        props = resource["Properties"]
        periods = [props["Period"]] if "Period" in props else []
        periods += [m["MetricStat"]["Period"] for m in props.get("Metrics", []) if "MetricStat" in m]
        periods += [m["Period"] for m in props.get("Metrics", []) if "Period" in m]
        assert all(p in (10, 20, 30) or p % 60 == 0 for p in periods), name
        total = max(periods) * int(props["EvaluationPeriods"])
        assert total <= (604800 if min(periods) >= 3600 else 86400), name
        longest = max(longest, total)
    assert longest == 3 * 86400  # the ticket tier's window: the rule above is what allows it


def test_a_model_outage_and_a_failing_synthetic_job_page_as_part_of_the_success_burn() -> None:
    rule = RESOURCES["JobSuccessBurnAlarm"]["Properties"]["AlarmRule"]["Fn::Sub"]
    assert re.search(r'OR ALARM\("\$\{ModelOutageAlarm\.Arn\}"\) OR ALARM\("\$\{SyntheticFailingAlarm\.Arn\}"\)$', rule)
    for part in ("ModelOutageAlarm", "SyntheticFailingAlarm"):
        assert "AlarmActions" not in RESOURCES[part]["Properties"], part
    assert "ActionsSuppressor" not in RESOURCES["JobSuccessBurnAlarm"]["Properties"]  # an OK is never held
