"""The timeout ladder as checked data.

Reads ``template.yaml`` and the ASL after parameter overrides, computes every
limit and the worst case of every path through the state machine (Lambda
service-error retries add their back-off only: the function never ran), and
refuses any inner limit that is not strictly inside its outer one with margin.
Which limit encloses which is declared once, in :mod:`chuixiang.timeouts`.
``cook`` and ``serve`` run this before anything starts; so does ``make test``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stack_template import ConfigError, FunctionSpec, Template, unqualified

from chuixiang.limit_rules import (
    SAFETY_MARGIN_S,
    STATE_TIMEOUT_MARGIN_S,
    Limit,
    Margin,
    Unit,
    required_margin_ms,
    state_timeout_seconds,
)
from chuixiang.settings import Settings
from chuixiang.timeouts import BY_PARAMETER, CLIENT_GIVE_UP, LIMITS, STATE_MACHINE
from chuixiang.upstream.dialects import DialectError, parse_dialects
from chuixiang_local.cloud.concurrency import min_unreserved

#: Limits whose value the ladder reads from the ASL itself (after substitution), and how it names them.
ASL_LABELS = {STATE_MACHINE.parameter: "state machine TimeoutSeconds"}
LAMBDA_SERVICE_ERRORS = {
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
}


@dataclass
class Check:
    inner: str
    inner_value: float
    outer: str
    outer_value: float
    margin: float
    unit: str

    @property
    def ok(self) -> bool:
        return self.inner_value + self.margin <= self.outer_value and self.inner_value < self.outer_value

    def line(self) -> str:
        status = "ok  " if self.ok else "FAIL"
        return (
            f"{status} {self.inner} = {self.inner_value:g} {self.unit}  <  {self.outer} = "
            f"{self.outer_value:g} {self.unit}  (margin needed {self.margin:g} {self.unit}, "
            f"have {self.outer_value - self.inner_value:g})"
        )


@dataclass
class StateLimit:
    name: str
    timeout_s: float
    source: str
    retry_backoff_s: float
    retry_attempts: int
    function: str | None = None


@dataclass
class Ladder:
    limits: list[tuple[str, str]] = field(default_factory=list)
    states: dict[str, StateLimit] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    worst_path: list[str] = field(default_factory=list)
    worst_path_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.ok for c in self.checks)

    def failures(self) -> list[str]:
        return self.problems + [c.line() for c in self.checks if not c.ok]

    def render(self) -> str:
        out = ["Limits"]
        out += [f"  {k:<44} {v}" for k, v in self.limits]
        out.append("States (TimeoutSeconds + worst retry back-off)")
        for s in self.states.values():
            retry = f" + {s.retry_backoff_s:g} s back-off ({s.retry_attempts} retries)" if s.retry_attempts else ""
            out.append(f"  {s.name:<18} {s.timeout_s:>7g} s{retry}   [{s.source}]")
        out.append(f"Worst path ({self.worst_path_s:g} s): {' -> '.join(self.worst_path)}")
        out.append("Checks")
        out += [f"  {c.line()}" for c in self.checks]
        out += [f"  FAIL {p}" for p in self.problems]
        out.append("ladder OK" if self.ok else "ladder BROKEN")
        return "\n".join(out)


def retry_backoff(retriers: list[dict[str, Any]]) -> tuple[float, int]:
    """Longest total wait the retriers can add (JitterStrategy only shortens it)."""
    total, attempts = 0.0, 0
    for r in retriers:
        interval, rate = float(r.get("IntervalSeconds", 1)), float(r.get("BackoffRate", 2.0))
        cap = float(r.get("MaxDelaySeconds", 10**9))
        n = int(r.get("MaxAttempts", 3))
        total += sum(min(interval * rate**i, cap) for i in range(n))
        attempts += n
    return total, attempts


def build_ladder(template: Template) -> Ladder:
    ladder = Ladder()
    functions = template.functions()
    _, _, asl = template.state_machine()
    sm_timeout = float(asl.get("TimeoutSeconds", 0) or 0)

    def value(limit: Limit) -> float:
        if limit.parameter == STATE_MACHINE.parameter:
            return sm_timeout
        return template.number(limit.parameter)

    by_arn = {spec.arn: spec for spec in functions.values()}
    state_functions: dict[str, FunctionSpec] = {}
    for name, state in asl["States"].items():
        if state["Type"] != "Task":
            continue
        fn = by_arn.get(unqualified(state.get("Parameters", {}).get("FunctionName", "")))
        if fn is not None:
            state_functions[name] = fn
        _check_task_state(ladder, name, state, fn)

    ladder.limits = [(f"{limit.title} ({limit.parameter})", f"{value(limit):g} {limit.unit}") for limit in LIMITS]
    ladder.limits += [(f"{s.logical_id} Timeout", f"{s.timeout_s} s") for s in functions.values()]
    for limit in LIMITS:
        _check_limit(ladder, limit, value, state_functions, functions, _deployed_dirs(template))

    ladder.problems += reservation_problems(template)
    try:  # not a limit, but as fatal when wrong: checked with the very overrides being deployed
        parse_dialects(str(template.parameters.get("ModelDialects", "")))
    except DialectError as exc:
        ladder.problems.append(str(exc))

    ladder.worst_path, ladder.worst_path_s = _worst_path(asl, ladder.states)
    ladder.checks.append(
        Check(
            "worst-case path",
            ladder.worst_path_s,
            ASL_LABELS[STATE_MACHINE.parameter],
            sm_timeout,
            SAFETY_MARGIN_S,
            "s",
        )
    )
    return ladder


def _check_task_state(ladder: Ladder, name: str, state: dict[str, Any], fn: FunctionSpec | None) -> None:
    """A Task state's own timeout (every task has one), its function's Timeout inside it, and its retries
    (a Lambda task retries only Lambda's service errors)."""
    backoff, attempts = retry_backoff(state.get("Retry", []))
    if "TimeoutSecondsPath" in state:
        if fn is None:
            ladder.problems.append(f"{name}: TimeoutSecondsPath on a non-Lambda task cannot be checked")
            return
        timeout = float(state_timeout_seconds(fn.timeout_s))
        source = f"{state['TimeoutSecondsPath']} = {fn.logical_id} Timeout + {STATE_TIMEOUT_MARGIN_S} s"
    elif "TimeoutSeconds" in state:
        timeout, source = float(state["TimeoutSeconds"]), "TimeoutSeconds"
    else:
        ladder.problems.append(f"Task state {name} has no TimeoutSeconds (the default is a year)")
        return
    ladder.states[name] = StateLimit(name, timeout, source, backoff, attempts, fn.logical_id if fn else None)
    if fn is None:
        return
    ladder.checks.append(
        Check(f"{fn.logical_id} Timeout", fn.timeout_s, f"{name} state TimeoutSeconds", timeout, 1, "s")
    )
    for r in state.get("Retry", []):
        extra = set(r.get("ErrorEquals", [])) - LAMBDA_SERVICE_ERRORS
        if extra:
            ladder.problems.append(
                f"{name} retries {sorted(extra)}: Lambda tasks may retry only "
                f"Lambda service errors (the stage handles its own retries)"
            )


def _check_limit(
    ladder: Ladder,
    limit: Limit,
    value: Callable[[Limit], float],
    state_functions: dict[str, FunctionSpec],
    functions: dict[str, FunctionSpec],
    deployed: set[str],
) -> None:
    """A declared limit: the function Timeout that must be it (the template must ``!Ref`` the parameter), and
    each limit it must sit inside (a function's Timeout only where these parameters deploy the function: the
    synthetic job's exists only with ``CanaryModels``)."""
    if limit.inside_state:
        fn = state_functions.get(limit.inside_state)
        if fn is None:
            ladder.problems.append(f"{limit.parameter}: no Lambda task state {limit.inside_state}")
        elif fn.timeout_s != value(limit):
            ladder.problems.append(
                f"{fn.logical_id} Timeout = {fn.timeout_s} s is not {limit.parameter} "
                f"= {value(limit):g} s (the template must !Ref the parameter)"
            )
    if limit.timeout_of:
        timed = next((f for f in functions.values() if f.code_dir.name == limit.timeout_of), None)
        if timed is None or timed.timeout_s != value(limit):
            ladder.problems.append(
                f"functions/{limit.timeout_of} Timeout is not {limit.parameter} "
                f"= {value(limit):g} s (the template must !Ref the parameter)"
            )
    for outer in limit.inside:
        code_dir = BY_PARAMETER[outer].timeout_of
        if code_dir is None or code_dir in deployed:
            ladder.checks.append(enclosure_check(limit, BY_PARAMETER[outer], value))


def _deployed_dirs(template: Template) -> set[str]:
    """The code directories of the functions these parameters deploy (a conditional one only when its
    condition holds)."""
    return {Path(str(r["Properties"]["CodeUri"])).name for r in template.deployed("AWS::Serverless::Function").values()}


def _label(limit: Limit) -> str:
    return ASL_LABELS.get(limit.parameter, limit.parameter)


def enclosure_check(inner: Limit, outer: Limit, value: Callable[[Limit], float]) -> Check:
    """``inner`` must sit inside ``outer`` by its declared margin, compared in ``inner``'s unit."""
    per_unit = 1000.0 if inner.unit is Unit.S else 1.0
    outer_value = outer.unit.to_ms(value(outer)) / per_unit
    outer_label = _label(outer) if outer.unit is inner.unit else f"{_label(outer)} ({inner.unit})"
    margin = required_margin_ms(inner, outer_value * per_unit) / per_unit
    return Check(_label(inner), value(inner), outer_label, outer_value, margin, str(inner.unit))


def markdown_table(template: Template) -> str:
    """docs/ladder.md's table: every declared limit, the fixed state timeouts, the worst path."""
    ladder = build_ladder(template)
    rows = ["| limit | parameter → env | default | must stay inside |", "|---|---|---|---|"]
    for limit in LIMITS:
        env = f" → `{limit.env}`" if limit.env else ""
        default = f"{template.number(limit.parameter):g} {limit.unit}"
        rows.append(
            f"| **{limit.title}**: {limit.meaning} | `{limit.parameter}`{env} | {default} | {_inside_text(limit)} |"
        )
    for state in ladder.states.values():
        if state.source == "TimeoutSeconds":
            rows.append(
                f"| `{state.name}` state (direct integration or fixed) | ASL `TimeoutSeconds` | "
                f"{state.timeout_s:g} s | worst path |"
            )
    rows.append(
        f"| worst path: {' → '.join(ladder.worst_path)} (+ Lambda service-error back-offs) | computed | "
        f"{ladder.worst_path_s:g} s | < `{STATE_MACHINE.parameter}` − {SAFETY_MARGIN_S} s |"
    )
    return "\n".join(rows)


def _inside_text(limit: Limit) -> str:
    if limit.inside_state:
        return f"< `{limit.inside_state}` state = Timeout + {STATE_TIMEOUT_MARGIN_S} s (`TimeoutSecondsPath`)"
    if limit.timeout_of:
        return "encloses the recipe limits (the canary runs outside the state machine)"
    if not limit.inside:
        return "outermost" if limit is CLIENT_GIVE_UP else "not a nested limit"
    margin = {Margin.STRICT: "", Margin.SAFETY: f" − {SAFETY_MARGIN_S} s", Margin.FINISH: " − finish margin"}[
        limit.margin
    ]
    return ", ".join(f"< `{outer}`{margin}" for outer in limit.inside)


def _worst_path(asl: dict[str, Any], states: dict[str, StateLimit]) -> tuple[list[str], float]:
    def cost(name: str) -> float:
        s = states.get(name)
        return s.timeout_s + s.retry_backoff_s if s else 0.0

    def successors(state: dict[str, Any]) -> list[str]:
        nxt = [c["Next"] for c in state.get("Choices", [])] + [c["Next"] for c in state.get("Catch", [])]
        nxt += [state[k] for k in ("Next", "Default") if k in state]
        return nxt

    best: dict[str, tuple[float, list[str]]] = {}

    def walk(name: str, seen: frozenset[str]) -> tuple[float, list[str]]:
        if name in seen:
            raise ConfigError(f"the state machine has a loop through {name}; its worst case is unbounded")
        if name in best:
            return best[name]
        tails = [walk(n, seen | {name}) for n in successors(asl["States"][name])]
        tail = max(tails, key=lambda t: t[0]) if tails else (0.0, [])
        best[name] = (cost(name) + tail[0], [name, *tail[1]])
        return best[name]

    total, path = walk(asl["StartAt"], frozenset())
    return path, total


#: The functions that reserve ``RecipeReservedConcurrency`` each.
RESERVING_FUNCTIONS = ("RecipeFunction", "ImageFunction")
#: How long one api invocation holds a unit of concurrency (a DynamoDB read or two and a StartExecution on
#: AWS): an assumption, stated where it is used. The API's throttle rates times this is its peak concurrency.
API_INVOCATION_S = 0.1


def api_peak(template: Template) -> int:
    """Concurrent api invocations at the stage's throttle rates (Little's law: rate x duration)."""
    rate = template.number("ApiThrottleRateLimit") + template.number("ApiPollRateLimit")
    return math.ceil(rate * API_INVOCATION_S)


def admitted_jobs(template: Template) -> int:
    """Jobs admission lets run at once, as the api function counts them: ``RecipeConcurrency`` streams, one a
    job (``whole``, or ``auto`` on a busy evening), or ``RecipeMaxStreams`` a job with ``RecipeSections=parallel``."""
    return Settings.model_validate(template.function_by_dir("api").env).admission_jobs


def reservation_problems(template: Template, account_limit: int | None = None, already_reserved: int = 0) -> list[str]:
    """A reservation below the admitted jobs throttles them; one the account cannot give fails the deploy; a
    quota that cannot hold the admitted jobs and the API's peak throttles jobs (new accounts have a quota of
    10 or 50). Each job runs one function at a time, however many model streams it holds."""
    reserved = int(template.number("RecipeReservedConcurrency"))
    admitted = admitted_jobs(template)
    problems = []
    if 0 < reserved < admitted:
        problems.append(
            f"RecipeReservedConcurrency = {reserved} is below the {admitted} jobs admission lets run "
            f"(RecipeConcurrency = {int(template.number('RecipeConcurrency'))} streams): admitted jobs would be "
            "throttled"
        )
    if account_limit is None:
        return problems
    wanted = reserved * len(RESERVING_FUNCTIONS)
    left = account_limit - already_reserved - wanted
    if reserved and left < min_unreserved(account_limit):
        problems.append(
            f"reserving {wanted} (RecipeReservedConcurrency = {reserved} for each of "
            f"{len(RESERVING_FUNCTIONS)} functions) leaves {left} of the account's concurrency "
            f"quota {account_limit} unreserved; Lambda requires {min_unreserved(account_limit)}: set "
            f"RecipeReservedConcurrency=0 or ask for a higher quota"
        )
    # Each admitted job runs one function at a time (submit, recipe or image); the api's invocations beside them.
    jobs = 0 if reserved else admitted
    need = jobs + api_peak(template)
    if need > left:
        problems.append(
            f"the account's concurrency quota {account_limit} ({left} unreserved) cannot hold "
            f"{need} at the peak: {jobs} admitted jobs (from RecipeConcurrency) + {api_peak(template)} api "
            f"invocations ((ApiThrottleRateLimit + ApiPollRateLimit) x {API_INVOCATION_S} s); stage "
            f"invocations beyond it are throttled and those jobs fail: ask for a higher quota or lower "
            f"RecipeConcurrency and the API's rates"
        )
    return problems


def account_concurrency(lambda_client: Any) -> tuple[int, int]:
    """(the account's concurrency quota, what is already reserved) in the current region."""
    limits = lambda_client.get_account_settings()["AccountLimit"]
    total = int(limits["ConcurrentExecutions"])
    return total, total - int(limits["UnreservedConcurrentExecutions"])


def check_or_raise(template: Template) -> Ladder:
    ladder = build_ladder(template)
    if not ladder.ok:
        raise ConfigError("timeout ladder is broken:\n  " + "\n  ".join(ladder.failures()))
    return ladder
