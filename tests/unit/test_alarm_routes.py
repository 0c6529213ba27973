"""Severity routes: a P1 or P2 alarm pages (AlarmTopic); a P3 opens a ticket (TicketTopic) and wakes nobody;
a part of a composite does neither. The severity is the one the runbook's heading gives the alarm."""

from __future__ import annotations

import re

from stack_template import REPO_ROOT

from ..support.template_doc import RESOURCES

RUNBOOK = (REPO_ROOT / "docs" / "runbook.md").read_text()


def _severity(alarm: str) -> str | None:
    for heading in re.findall(r"^### (.+)$", RUNBOOK, re.M):
        names, _, tail = heading.partition(" (")
        if alarm in [n.strip() for n in names.split(",")]:
            found = re.match(r"(P\d)", tail)
            return found.group(1) if found else None
    return None


def test_every_alarm_goes_where_its_severity_says() -> None:
    routed = {}
    for name, resource in RESOURCES.items():
        if resource["Type"] not in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm"):
            continue
        actions = resource["Properties"].get("AlarmActions") or []
        topics = {a["Ref"] for a in actions if isinstance(a, dict) and "Ref" in a}
        assert resource["Properties"].get("OKActions", actions) == actions, name
        routed[name] = topics
    tickets = {n for n, t in routed.items() if t == {"TicketTopic"}}
    pages = {n for n, t in routed.items() if t == {"AlarmTopic"}}
    slow_burns = {"JobSuccessSlowBurnAlarm", "AdmissionSlowBurnAlarm", "JobLatencySlowBurnAlarm"}
    assert tickets == {
        "ReconcilerFailingAlarm",
        "CanaryErrorsAlarm",
        "CanaryMissingAlarm",
        "SyntheticMissingAlarm",
        *slow_burns,
    }
    for name in tickets:
        assert _severity(name) in ("P3", None), name  # the canary's errors are in the function errors' section
    for name in pages:
        assert _severity(name) in ("P1", "P2", None), name
    assert "AdmissionBurnAlarm" in pages and _severity("AdmissionBurnAlarm") == "P2"
    assert all(t <= {"AlarmTopic", "TicketTopic"} for t in routed.values())
