"""What pages, evaluated: the template's alarm math and composite rules for the traffic the on-call fears
(``chuixiang_local.alarm_rules``; the thresholds from the template's defaults). A total outage pages however
little traffic there is; one failure in a quiet hour, or the background failure rate, does not."""

from __future__ import annotations

import pytest
from stack_template import Template

from chuixiang_local.alarm_rules import AlarmRules

RULES = AlarmRules(Template())


def _jobs(failed: float | None, succeeded: float | None) -> dict[str, float | None]:
    """One window's executions (Step Functions publishes nothing for a count of zero: ``None``)."""
    return {"failed": failed, "succeeded": succeeded, "timedout": None, "aborted": None}


def _success_pages(windows: dict[str, dict[str, float | None]]) -> bool:
    in_alarm = {f"JobSuccessBurn{w}Alarm": RULES.breaches(f"JobSuccessBurn{w}Alarm", f) for w, f in windows.items()}
    return RULES.composite("JobSuccessBurnAlarm", in_alarm)


def test_a_total_outage_at_four_jobs_an_hour_pages() -> None:
    """The gate it replaced counted a rate of 0 below 5 stages per 15 minutes: an outage under ~20 jobs an
    hour never paged."""
    assert _success_pages({"1h": _jobs(4, None), "5m": _jobs(1, None), "6h": _jobs(4, 30), "1h6x": _jobs(2, None)})


def test_one_failure_in_a_quiet_hour_does_not_page() -> None:
    windows = {"1h": _jobs(1, 3), "5m": _jobs(1, None), "6h": _jobs(1, 20), "1h6x": _jobs(1, 1)}
    assert RULES.breaches("JobSuccessBurn5mAlarm", windows["5m"])  # the short window alone would
    assert not _success_pages(windows)


def test_the_background_failure_rate_does_not_page() -> None:
    """1 % failing is the objective's whole budget, spent evenly: a burn rate of 1. A window of an hour or more
    needs three failures and counts them one standard deviation low (10 - √10), so noise near a threshold does
    not page;
    so does the 5-minute window with more than one job (after an outage, one failure among five re-paged), while
    the only job of a window says what it says."""
    assert RULES.value("JobSuccessBurn1h6xAlarm", _jobs(2, 198)) == 0
    assert RULES.value("JobSuccessBurn5mAlarm", _jobs(1, 4)) == 0
    assert RULES.value("JobSuccessBurn5mAlarm", _jobs(2, 3)) == pytest.approx((2 - 2**0.5) / 5 / 0.01)
    assert RULES.value("JobSuccessBurn5mAlarm", _jobs(1, None)) == pytest.approx(100.0)
    assert RULES.value("JobSuccessBurn1hAlarm", _jobs(10, 990)) == pytest.approx((10 - 10**0.5) / 1000 / 0.01)
    assert not _success_pages({"1h": _jobs(10, 990), "5m": _jobs(1, 82), "6h": _jobs(60, 5940), "1h6x": _jobs(5, 495)})


def test_a_slow_burn_pages_through_the_six_hour_pair() -> None:
    """10 % failing for hours: under 14.4x the hour's budget, over 6x the six hours' (60 - √60 of 600) and the
    last hour's (12 - √12 of 100)."""
    windows = {"1h": _jobs(12, 88), "5m": _jobs(1, 8), "6h": _jobs(60, 540), "1h6x": _jobs(12, 88)}
    assert not RULES.breaches("JobSuccessBurn1hAlarm", windows["1h"])
    assert _success_pages(windows)


def test_every_way_an_execution_ends_badly_is_spent_from_the_budget() -> None:
    figures = {"failed": None, "succeeded": 10.0, "timedout": 2.0, "aborted": 1.0}
    assert RULES.value("JobSuccessBurn1h6xAlarm", figures) == pytest.approx((3 - 3**0.5) / 13 / 0.01)


def _latency(jobs: float, within_percent: float) -> dict[str, float | None]:
    return {"jobs": jobs, "within": within_percent}


def test_slow_jobs_page_when_they_burn_the_latency_budget() -> None:
    """``within`` is the period's PR(:LatencyObjectiveMs): the share of SUCCEEDED jobs no slower than it."""
    # 50 % of 20 slow, counted one standard deviation low, against 5 %
    assert RULES.value("JobLatencyBurn1h6xAlarm", _latency(20, 50)) == pytest.approx((10 - 10**0.5) / 20 / 0.05)
    slow = {"1h": _latency(60, 10), "5m": _latency(2, 0), "6h": _latency(60, 70), "1h6x": _latency(10, 60)}
    in_alarm = {f"JobLatencyBurn{w}Alarm": RULES.breaches(f"JobLatencyBurn{w}Alarm", f) for w, f in slow.items()}
    assert RULES.composite("JobLatencyBurnAlarm", in_alarm)
    one_slow_job = {"1h": _latency(6, 84), "5m": _latency(1, 0), "6h": _latency(30, 97), "1h6x": _latency(3, 67)}
    in_alarm = {
        f"JobLatencyBurn{w}Alarm": RULES.breaches(f"JobLatencyBurn{w}Alarm", f) for w, f in one_slow_job.items()
    }
    assert not RULES.composite("JobLatencyBurnAlarm", in_alarm)


@pytest.mark.parametrize(
    ("failed", "stages", "pages"),
    [(2, 2, False), (3, 10, True), (3, 20, False), (None, 40, False), (None, None, False)],
)
def test_the_image_failure_rate_needs_three_failures_however_few_jobs_ran(
    failed: float | None, stages: float | None, pages: bool
) -> None:
    assert RULES.breaches("ImageFailureRateAlarm", {"failed": failed, "stages": stages}) is pages


def test_a_model_outage_is_the_breaker_and_the_failure_rate_together() -> None:
    failing = RULES.breaches("RecipeFailureRateAlarm", {"failed": 4.0, "succeeded": 2.0})
    assert failing and not RULES.breaches("RecipeFailureRateAlarm", {"failed": 2.0, "succeeded": None})
    opened = RULES.breaches("BreakerOpenAlarm", {"opened": 1.0})
    assert RULES.composite("ModelOutageAlarm", {"BreakerOpenAlarm": opened, "RecipeFailureRateAlarm": failing})
    # A breaker open while a fallback serves: no page.
    assert not RULES.composite("ModelOutageAlarm", {"BreakerOpenAlarm": True, "RecipeFailureRateAlarm": False})


@pytest.mark.parametrize("composite", ["ApiFailingAlarm", "ReconcilerFailingAlarm", "JobsEndedOutsideTheWorkflowAlarm"])
def test_any_part_of_one_cause_pages_its_composite_once(composite: str) -> None:
    parts = RULES.parts(composite)
    assert len(parts) >= 3
    for part in parts:
        assert RULES.composite(composite, {part: True})
    assert RULES.composite(composite, dict.fromkeys(parts, True))
    assert not RULES.composite(composite, {})


def test_the_first_content_bound_is_half_the_limit_from_the_parameter() -> None:
    rules = AlarmRules(Template({"RecipeFirstContentTimeoutMs": "40000"}))
    assert rules.breaches("RecipeFirstContentAlarm", {"p90": 20_001.0})
    assert not rules.breaches("RecipeFirstContentAlarm", {"p90": 20_000.0})
    with pytest.raises(ValueError, match="anomaly"):
        rules.breaches("RecipeFirstContentAnomalyAlarm", {"p90": 1.0})


def _admission(refused: float | None, started: float | None) -> dict[str, float | None]:
    return {"refused": refused, "started": started}


def _admission_pages(windows: dict[str, dict[str, float | None]]) -> bool:
    in_alarm = {f"AdmissionBurn{w}Alarm": RULES.breaches(f"AdmissionBurn{w}Alarm", f) for w, f in windows.items()}
    return RULES.composite("AdmissionBurnAlarm", in_alarm)


def test_turning_users_away_pages() -> None:
    """The success SLO counts executions: a saturated admission left every burn alarm at 0 %. Half the POSTs
    refused for an hour pages; one refusal in a busy hour does not; a quiet hour with none refused does not."""
    assert RULES.value("AdmissionBurn1h6xAlarm", _admission(50, 50)) == pytest.approx((50 - 50**0.5) / 100 / 0.01)
    assert _admission_pages(
        {"1h": _admission(50, 50), "5m": _admission(5, 4), "6h": _admission(60, 300), "1h6x": _admission(20, 25)}
    )
    assert not _admission_pages(
        {"1h": _admission(1, 300), "5m": _admission(1, 20), "6h": _admission(1, 1800), "1h6x": _admission(1, 150)}
    )
    assert not _admission_pages(
        {
            "1h": _admission(None, 4),
            "5m": _admission(None, None),
            "6h": _admission(None, 20),
            "1h6x": _admission(None, 2),
        }
    )
