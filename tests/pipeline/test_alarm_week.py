"""What pages, measured over simulated weeks and incidents (``chuixiang_local.alarm_scenarios``): the runbook's
table is the simulation's (``make alarms-table`` rewrites it), and what it says holds - a quiet week pages
nobody, a model down pages once and stays in ALARM, a 5x burn usually pages nobody. About 20 s."""

from __future__ import annotations

import pytest

from chuixiang_local import burn_alarms
from chuixiang_local.alarm_scenarios import RATES, Summary, summaries, table
from chuixiang_local.template import Template

Found = dict[tuple[str, float], Summary]


@pytest.fixture(scope="module")
def found() -> Found:
    return summaries(Template())


def test_the_runbooks_table_is_the_simulations(found: Found) -> None:
    assert burn_alarms.runbook_table() == table(found), "stale: run `make alarms-table`"


@pytest.mark.parametrize("rate", RATES)
def test_a_quiet_week_pages_nobody(found: Found, rate: int) -> None:
    quiet = found[("quiet week", rate)]
    assert quiet.pages == (0, 0) and quiet.tickets == (0, 0)


@pytest.mark.parametrize("rate", RATES)
def test_a_model_down_pages_once(found: Found, rate: int) -> None:
    down = found[("model down 2 h", rate)]
    assert down.pages[0] == 1 and down.pages[1] <= 2 and down.tickets == (0, 0)


def test_at_sixty_jobs_an_hour_it_pages_within_minutes_and_stays(found: Found) -> None:
    fast = found[("model down 2 h", 60)]
    assert fast.pages == (1, 1) and fast.oks_during == 0
    assert fast.first_page_min is not None and fast.first_page_min <= 15


@pytest.mark.parametrize("rate", RATES)
def test_a_five_times_burn_usually_pages_nobody(found: Found, rate: int) -> None:
    assert found[("5 % failing 8 h", rate)].pages[0] == 0
