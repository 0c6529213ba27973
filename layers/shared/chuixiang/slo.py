"""The service level objectives, declared once as data: what a bad event is for each objective (success,
admission, latency), the windows and burn rates that page or file a ticket. ``chuixiang_local.burn_alarms``
writes the alarms into ``observability/template.yaml`` from this (``make alarms``), beside the limits in
:mod:`.timeouts` that the ladder checks. The metrics and dimensions are the template's (CloudFormation's YAML flow
syntax).

Why each choice, measured with the runner's alarm evaluator (``tests/runner/test_alarm_timeline.py``, the
runbook's "What pages, measured"):

* **A window of an hour or more counts at least ``min_bad`` bad events** (2.5: three) and counts them one
  standard deviation low, so two failures in a quiet hour do not page however few jobs ran. Gates are
  half-integers: a latency count is jobs × a percentile share, a float.
* **The 5-minute window says what its last events said.** At 4 jobs an hour most 5-minute windows are empty;
  read as "no failures" they reset the page every few minutes of an outage, read as "still failing" they page
  again after it, while the hour still holds its failures. So an empty one has no data point (``IF`` without a
  false value) and ``TreatMissingData: ignore``: CloudWatch looks back to the last period that had one, then
  keeps the alarm's state. With more than one job it counts its failures one standard deviation low: one
  background failure among five jobs re-paged at 60 jobs an hour.
* **The tiers** are the SRE workbook's (14.4x over 1 h with 5 minutes, 6x over 6 h, 1x over 3 days as a
  ticket), with one change: the 6x tier's short window is the last hour, counted as a long one, not 30 minutes.
  After an incident the 6-hour window holds it for six hours and the short window decides alone; a 30-minute
  window crossed 6x on two failures of a 4 % trickle and paged again and again (``docs/decisions/
  paging-windows.md``, with the hold that was tried instead). The 3-day window is one period: CloudWatch allows
  Period x EvaluationPeriods up to 7 days with periods of an hour or more (PutMetricAlarm, ``Period``). The
  ticket is held while the page is on, and for its short window after (it would repeat the page's news).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    suffix: str  #: in the alarm's name: 1h, 5m…
    seconds: int
    words: str  #: "the last hour"


@dataclass(frozen=True)
class Tier:
    long: Window
    short: Window
    burn: float  #: the long window's threshold
    route: str  #: AlarmTopic (a page) or TicketTopic
    short_low: bool = False  #: the short window counts its bad events one standard deviation low, as a long one


@dataclass(frozen=True)
class Metric:
    id: str
    namespace: str
    name: str
    dimensions: str  #: the YAML flow list of the metric's dimensions
    stat: str = "Sum"


@dataclass(frozen=True)
class Objective:
    name: str  #: the alarms' prefix: JobSuccess → JobSuccessBurn1hAlarm
    parameter: str  #: the objective's template parameter
    label: str  #: the burn expression's label: "success error budget burn rate"
    metrics: tuple[Metric, ...]
    bad: str  #: metric math: the period's bad events
    total: str  #: metric math: the period's events (``bad`` is defined)
    what: str  #: what a bad event is, for the descriptions
    page: str  #: the paging composite's description, before the tiers
    #: The 5-minute window counts its bad events one standard deviation low (:attr:`Tier.short_low`). Not with a
    #: wide budget: at 5 %, fewer than 13 jobs all bad would read under 14.4x, and the hour's tier could not fire.
    short_low: bool = True
    also_pages: tuple[str, ...] = ()  #: other alarms whose ALARM is this page's too (a cause, or what users see)


STATES = "[{Name: StateMachineArn, Value: !Ref RecipeStateMachine}]"
SERVICE = "[{Name: service, Value: chuixiang}]"
HOUR, FIVE_MINUTES = Window("1h", 3600, "the last hour"), Window("5m", 300, "the last 5 minutes")
SIX_HOURS, HALF_HOUR = Window("6h", 21600, "the last 6 hours"), Window("30m", 1800, "the last 30 minutes")
#: The slow page's short window and the ticket's: an hour, and 6 hours (named apart from the long windows of
#: the same length, which have another threshold).
HOUR_AT_SIX, SIX_HOURS_AT_ONE = Window("1h6x", 3600, "the last hour"), Window("6h1x", 21600, "the last 6 hours")
THREE_DAYS = Window("3d", 259200, "the last 3 days")
#: Windows this long count as long ones (:data:`MIN_BAD`, one standard deviation low); shorter ones say what their
#: last events said.
COUNTED_AS_LONG_S = 3600
#: Long windows need this many bad events (a half-integer: three) before their burn counts.
MIN_BAD = 2.5
TIERS = (
    Tier(HOUR, FIVE_MINUTES, 14.4, "AlarmTopic", short_low=True),
    Tier(SIX_HOURS, HOUR_AT_SIX, 6, "AlarmTopic"),
    Tier(THREE_DAYS, SIX_HOURS_AT_ONE, 1, "TicketTopic"),
)

OBJECTIVES = (
    Objective(
        name="JobSuccess",
        parameter="SuccessObjective",
        label="success error budget burn rate",
        metrics=(
            Metric("failed", "AWS/States", "ExecutionsFailed", STATES),
            Metric("timedout", "AWS/States", "ExecutionsTimedOut", STATES),
            Metric("aborted", "AWS/States", "ExecutionsAborted", STATES),
            Metric("succeeded", "AWS/States", "ExecutionsSucceeded", STATES),
        ),
        bad="FILL(failed, 0) + FILL(timedout, 0) + FILL(aborted, 0)",
        total="bad + FILL(succeeded, 0)",
        what="jobs ended FAILED (any cause - a model, a Lambda timeout or crash, the state machine timeout, an abort)",
        page="Jobs are failing fast enough to spend the month's error budget (1 - SuccessObjective) early",
        also_pages=("ModelOutageAlarm", "SyntheticFailingAlarm"),
    ),
    Objective(
        name="Admission",
        parameter="AdmissionObjective",
        label="admission error budget burn rate",
        metrics=(
            Metric(
                "refused",
                "Chuixiang",
                "JobsRejected",
                "[{Name: Reason, Value: full}, {Name: service, Value: chuixiang}]",
            ),
            Metric("started", "AWS/States", "ExecutionsStarted", STATES),
        ),
        bad="FILL(refused, 0)",
        total="bad + FILL(started, 0)",
        what="POSTs were refused with 429 for lack of a slot (Reason full)",
        page=(
            "Users are being turned away - POSTs refused with 429 for lack of a slot fast enough to spend the "
            "month's admission budget (1 - AdmissionObjective) early. RecipeConcurrency (and the provider's quota "
            "behind it) is too small for the traffic, or jobs hold their slots too long"
        ),
    ),
    Objective(
        name="JobLatency",
        parameter="LatencyObjective",
        label="latency error budget burn rate",
        metrics=(
            Metric(
                "within",
                "Chuixiang",
                "JobLatencyMs",
                "[{Name: Status, Value: SUCCEEDED}, {Name: service, Value: chuixiang}]",
                '!Sub "PR(:${LatencyObjectiveMs})"',
            ),
            Metric(
                "jobs",
                "Chuixiang",
                "JobLatencyMs",
                "[{Name: Status, Value: SUCCEEDED}, {Name: service, Value: chuixiang}]",
                "SampleCount",
            ),
        ),
        bad="FILL(jobs, 0) * (1 - FILL(within, 100) / 100)",
        total="FILL(jobs, 0)",
        what="SUCCEEDED jobs took longer than LatencyObjectiveMs from their POST",
        short_low=False,
        page=(
            "Jobs are slow (over LatencyObjectiveMs, POST to SUCCEEDED) often enough to spend the month's latency "
            "budget (1 - LatencyObjective) early"
        ),
    ),
)
