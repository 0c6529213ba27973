"""Every relative link of the README and of ``docs/`` points at a file that exists (pages were split and
moved: a stale link is how a newcomer gets lost), and the README stays short enough to read first."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_every_relative_link_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a URL, or an anchor on the same page
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


def test_every_error_code_a_client_can_get_is_in_the_api_page() -> None:
    from chuixiang.errors import ErrorCode, HttpErrorCode

    page = (ROOT / "docs" / "api.md").read_text()
    missing = [c.value for c in (*ErrorCode, *HttpErrorCode) if f"`{c.value}`" not in page]
    assert missing == []


def test_every_alarm_has_its_runbook_entry() -> None:
    """The on-call opens docs/runbook.md from an alarm: every alarm of the template is named there, under a
    heading or in its group's list, and none named there is gone from the template."""
    from stack_template import Template

    runbook = (ROOT / "docs" / "runbook.md").read_text()
    template = Template()
    every = {**template.of_type("AWS::CloudWatch::Alarm"), **template.of_type("AWS::CloudWatch::CompositeAlarm")}
    alarms = set(every)
    named = set(re.findall(r"\b([A-Z][A-Za-z0-9]+Alarm)\b", runbook)) - {"CompositeAlarm"}  # an --alarm-types value
    assert alarms <= named, f"no runbook entry: {sorted(alarms - named)}"
    assert named <= alarms, f"the runbook names alarms the template lacks: {sorted(named - alarms)}"
    for name, alarm in every.items():  # the page points the way there
        assert alarm["Properties"]["AlarmDescription"].endswith(f"Runbook - docs/runbook.md, {name}."), name
