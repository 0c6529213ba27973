"""What pages, measured over simulated weeks and incidents (``chuixiang_local.alarm_scenarios``): the runbook's
table is the simulation's (``make alarms-table`` rewrites it), and what it says holds - a quiet week pages
nobody, a model down pages once and stays in ALARM, the trickle after an incident pages nobody, a 5x burn
usually pages nobody and a 10x burn pages. About 8 s of CPU."""

from __future__ import annotations

import pytest
from stack_template import Template

from chuixiang_local import burn_alarms
from chuixiang_local.alarm_scenarios import RATES, SYNTHETIC_RATES, Key, Summary, summaries, table

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

Found = dict[Key, Summary]


@pytest.fixture(scope="module")
def found() -> Found:
    return summaries(Template())


def test_the_runbooks_table_is_the_simulations(found: Found) -> None:
    assert burn_alarms.runbook_table() == table(found), "stale: run `make alarms-table`"


@pytest.mark.parametrize("rate", RATES)
def test_a_quiet_week_pages_nobody(found: Found, rate: int) -> None:
    quiet = found[("quiet week", rate, False)]
    assert quiet.pages == (0, 0) and quiet.tickets == (0, 0)


@pytest.mark.parametrize("rate", RATES)
def test_a_model_down_pages_once(found: Found, rate: int) -> None:
    down = found[("model down 2 h", rate, False)]
    assert down.pages[0] == 1 and down.tickets == (0, 0)
    # once while it lasts (at 4-12 jobs an hour a background failure can leave the hour's window a minute after
    # the page: an OK and the page again); after it ends, the long windows hold it for hours, and a lone
    # background failure may page again (the runbook's "most" column)
    assert down.pages_during <= (1 if rate >= 60 else 2)


def test_at_sixty_jobs_an_hour_it_pages_within_minutes_and_stays(found: Found) -> None:
    fast = found[("model down 2 h", 60, False)]
    assert fast.pages[0] == 1 and fast.oks_during == 0 and fast.pages_during == 1
    assert fast.first_page_min is not None and fast.first_page_min <= 15


@pytest.mark.parametrize("rate", RATES)
def test_a_five_times_burn_usually_pages_nobody(found: Found, rate: int) -> None:
    assert found[("5 % failing 8 h", rate, False)].pages[0] == 0


@pytest.mark.parametrize("rate", RATES)
def test_after_an_incident_the_trickle_pages_nobody(found: Found, rate: int) -> None:
    """An hour down, then 4 % failing (under the 6x page) for seven: one page in the median run, the outage's
    (none at 4 jobs an hour when its four jobs look like the background), and it stays while the outage lasts."""
    after = found[("down 1 h, then 4 % for 7 h", rate, False)]
    assert after.pages[0] <= 1 and after.oks_during == 0 and after.pages_during <= 1


@pytest.mark.parametrize("rate", (12, 60))
def test_a_ten_times_burn_pages(found: Found, rate: int) -> None:
    """10x is over the 6-hour tier's 6x: it pages within the 8 hours (the runbook says it is late and flaps)."""
    burn = found[("10 % failing 8 h", rate, False)]
    assert burn.pages[0] >= 1 and burn.first_page_min is not None and burn.first_page_min < 8 * 60


@pytest.mark.parametrize("rate", SYNTHETIC_RATES)
def test_with_the_synthetic_job_a_quiet_night_outage_pages_within_minutes_and_stays(found: Found, rate: int) -> None:
    """At 4 jobs an hour an outage looks like the background for an hour; the synthetic job's runs (every
    5 minutes, a failure confirmed by a second job) page within 15 minutes and hold the page while it lasts,
    and still page nobody in a quiet week."""
    down = found[("model down 2 h", rate, True)]
    assert down.pages[0] == 1 and down.oks_during == 0 and down.pages_during == 1
    assert down.first_page_min is not None and down.first_page_min <= 15
    assert found[("quiet week", rate, True)].pages == (0, 0)
    assert found[("5 % failing 8 h", rate, True)].pages[0] == 0
