"""The timeout ladder as checked data (DESIGN §3).

Reads ``template.yaml`` and the ASL after parameter overrides, computes every
limit and the worst case of every path through the state machine (Lambda
service-error retries add their back-off only: the function never ran), and
refuses any inner limit that is not strictly inside its outer one with margin.
``cook`` and ``serve`` run this before anything starts; so does ``make test``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chuixiang.ladder_rules import (  # the layer package is the one source of these rules
    STATE_TIMEOUT_MARGIN_S,
    finish_margin_ms,
    state_timeout_seconds,
)

from .template import ConfigError, Template

#: Worst-case path must leave this much of the state machine timeout unused.
PATH_MARGIN_S = 5.0
LAMBDA_SERVICE_ERRORS = {"Lambda.ServiceException", "Lambda.AWSLambdaException",
                         "Lambda.SdkClientException", "Lambda.TooManyRequestsException"}
DEFAULT_TASK_TIMEOUT = 99999999


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
        return (f"{status} {self.inner} = {self.inner_value:g} {self.unit}  <  {self.outer} = "
                f"{self.outer_value:g} {self.unit}  (margin needed {self.margin:g} {self.unit}, "
                f"have {self.outer_value - self.inner_value:g})")


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
    p = template.number
    ladder = Ladder()
    functions = template.functions()
    by_arn = {spec.arn: spec for spec in functions.values()}
    _, _, asl = template.state_machine()
    sm_timeout = float(asl.get("TimeoutSeconds", 0) or 0)
    recipe_fn = template.function_by_dir("recipe")
    image_fn = template.function_by_dir("image")
    idle_ms, total_ms = p("RecipeIdleTimeoutMs"), p("RecipeTotalTimeoutMs")
    give_up = p("ClientGiveUpSeconds")

    ladder.limits = [
        ("stream idle (RecipeIdleTimeoutMs)", f"{idle_ms:g} ms"),
        ("stream total (RecipeTotalTimeoutMs)", f"{total_ms:g} ms"),
        ("recipe retry window (RecipeRetryWindowMs)", f"{p('RecipeRetryWindowMs'):g} ms"),
        ("image retry window (ImageRetryWindowMs)", f"{p('ImageRetryWindowMs'):g} ms"),
        *[(f"{s.logical_id} Timeout", f"{s.timeout_s} s") for s in functions.values()],
        ("state machine TimeoutSeconds", f"{sm_timeout:g} s"),
        ("client gives up (ClientGiveUpSeconds)", f"{give_up:g} s"),
    ]

    for name, state in asl["States"].items():
        if state["Type"] != "Task":
            continue
        fn = by_arn.get(state.get("Parameters", {}).get("FunctionName", ""))
        backoff, attempts = retry_backoff(state.get("Retry", []))
        if "TimeoutSecondsPath" in state:
            if fn is None:
                ladder.problems.append(f"{name}: TimeoutSecondsPath on a non-Lambda task cannot be checked")
                continue
            timeout = float(state_timeout_seconds(fn.timeout_s))
            source = f"{state['TimeoutSecondsPath']} = {fn.logical_id} Timeout + {STATE_TIMEOUT_MARGIN_S} s"
        elif "TimeoutSeconds" in state:
            timeout, source = float(state["TimeoutSeconds"]), "TimeoutSeconds"
        else:
            ladder.problems.append(f"Task state {name} has no TimeoutSeconds (the default is a year)")
            continue
        ladder.states[name] = StateLimit(name, timeout, source, backoff, attempts, fn.logical_id if fn else None)
        if fn is not None:
            ladder.checks.append(Check(f"{fn.logical_id} Timeout", fn.timeout_s,
                                       f"{name} state TimeoutSeconds", timeout, 1, "s"))
            for r in state.get("Retry", []):
                extra = set(r.get("ErrorEquals", [])) - LAMBDA_SERVICE_ERRORS
                if extra:
                    ladder.problems.append(f"{name} retries {sorted(extra)}: Lambda tasks may retry only "
                                           f"Lambda service errors (the stage handles its own retries)")

    recipe_margin_ms = finish_margin_ms(recipe_fn.timeout_s * 1000)
    ladder.checks += [
        Check("RecipeIdleTimeoutMs", idle_ms, "RecipeTotalTimeoutMs", total_ms, 1, "ms"),
        Check("RecipeRetryWindowMs", p("RecipeRetryWindowMs"), "RecipeTotalTimeoutMs", total_ms, 1, "ms"),
        Check("RecipeTotalTimeoutMs", total_ms, "RecipeFunctionTimeout (ms)", recipe_fn.timeout_s * 1000,
              recipe_margin_ms, "ms"),
        Check("ImageRetryWindowMs", p("ImageRetryWindowMs"), "ImageFunctionTimeout (ms)",
              image_fn.timeout_s * 1000, finish_margin_ms(image_fn.timeout_s * 1000), "ms"),
    ]
    ladder.worst_path, ladder.worst_path_s = _worst_path(asl, ladder.states)
    ladder.checks.append(Check("worst-case path", ladder.worst_path_s, "state machine TimeoutSeconds",
                               sm_timeout, PATH_MARGIN_S, "s"))
    ladder.checks.append(Check("state machine TimeoutSeconds", sm_timeout, "ClientGiveUpSeconds", give_up, 5, "s"))
    return ladder


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


def check_or_raise(template: Template) -> Ladder:
    ladder = build_ladder(template)
    if not ladder.ok:
        raise ConfigError("timeout ladder is broken:\n  " + "\n  ".join(ladder.failures()))
    return ladder
