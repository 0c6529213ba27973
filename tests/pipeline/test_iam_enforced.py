"""Every statement of every role is needed, and the local cloud enforces each one.

First every scenario runs with each role as the template writes it, recording which statement allowed
each call (none may be refused, and every statement must allow something). Then each statement is
removed in turn and a scenario that used it runs again: the call it allowed is refused as AWS refuses it
(AccessDeniedException through botocore, logged with role, action and resource), and the scenario shows
what that breaks. The state machine's log delivery statement is what CreateStateMachine checks."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chuixiang.stores.admission import Admission, slot_key
from chuixiang_local.cloud.iam.gate import Principal
from chuixiang_local.cloud.iam.roles import LOG_DELIVERY_ACTIONS, Role, log_delivery_refused
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.scaled import SCALED
from ..support.serve import free_port
from ..support.waiting import wait_until

# 15 s or more in all, scheduled first (tests/conftest.py); mostly waiting on the scaled limits: its own lane
pytestmark = [pytest.mark.long_module, pytest.mark.waiting]

SLOTS = 2


@pytest.fixture(scope="module")
def iam_cloud(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    work = tmp_path_factory.mktemp("iam")
    with (
        open(work / "functions.log", "w") as log,
        LocalCloud(
            {**SCALED, "RecipeConcurrency": str(SLOTS)},
            model_base_url=module_fake.base_url,
            work_dir=Path(work),
            log=log,
        ) as c,
    ):
        yield c


def _executions_ended(cloud: LocalCloud) -> None:
    wait_until(lambda: not cloud.running_executions(), timeout_s=30, what="executions to end")


def _settle(cloud: LocalCloud) -> None:
    """No execution left running and every admission slot free: the next scenario starts clean."""
    _executions_ended(cloud)
    table = cloud.job_store().table
    for n in range(SLOTS):
        table.delete_item(Key=slot_key(n))


def cook(cloud: LocalCloud, api: LocalApi, fake: FakeModel) -> str:
    """A job from POST to its end: every stage, the picture, the slot freed, polls."""
    status, doc = api.post_dish(f"菜{uuid.uuid4().hex[:8]}")
    if status != 202:
        return f"POST {status} {doc['error']['code']}"
    seen: list[tuple[int, dict[str, Any]]] = []

    def ended() -> bool:
        seen.append(api.get(doc["jobId"]))
        return seen[-1][0] != 200 or seen[-1][1]["status"] in ("SUCCEEDED", "FAILED")

    wait_until(ended, timeout_s=30, what="the job to end", interval_s=0.1)
    status, done = seen[-1]
    if status != 200:
        return f"GET {status} {done['error']['code']}"
    return f"{done['status']} {(done.get('error') or done.get('imageError') or {}).get('code', '')}".strip()


def turned_away(cloud: LocalCloud, api: LocalApi, fake: FakeModel) -> str:
    """Every slot held: the POST reads them all (BatchGetItem) before its 429."""
    store = cloud.job_store()
    for n in range(SLOTS):
        Admission(store.table, SLOTS).admit(f"held-{n}", "another-caller", until=2**31)
    status, doc = api.post_dish("排队的菜")
    return f"POST {status} {doc['error']['code']}"


def reconciled(cloud: LocalCloud, api: LocalApi, fake: FakeModel) -> str:
    """An execution stopped mid-recipe: the reconciler fails the job (EventBridge's rule)."""
    fake.chat_script.append(ChatBehaviour(headers_delay_s=30))
    status, doc = api.post_dish(f"被停的菜{uuid.uuid4().hex[:8]}")
    if status != 202:
        return f"POST {status}"
    before = fake.count("/chat/completions")
    wait_until(lambda: fake.count("/chat/completions") > before - 1, timeout_s=15, what="the recipe call")
    arn = cloud.execution_arn(doc["jobId"])
    wait_until(lambda: cloud.describe_execution(arn), timeout_s=15, what="the execution")
    cloud.client("stepfunctions").stop_execution(executionArn=arn, error="Operator", cause="test")
    wait_until(lambda: cloud.reconciled(arn), timeout_s=20, what="the reconciler's delivery")
    fake.chat_script.clear()
    return str((cloud.job_store().get(doc["jobId"]) or {}).get("status"))


def probed(cloud: LocalCloud, api: LocalApi, fake: FakeModel) -> str:
    """The canary probes a model (its health written, the key read)."""
    spec = cloud.template.function_by_dir("canary")
    result = cloud.invoke(spec, {"models": [cloud.template.parameters["RecipeModel"]], "dish": "番茄炒蛋"})
    return "ok" if not result.failed else f"failed {result.error_type}"


def synthetic_run(cloud: LocalCloud, api: LocalApi, fake: FakeModel) -> str:
    """The synthetic job takes its lease and gives it back (its API here answers nothing: an api_error run)."""
    cloud.api_url = f"http://127.0.0.1:{free_port()}"
    try:
        result = cloud.invoke(cloud.template.function_by_dir("synthetic"), {"dish": "番茄炒蛋"})
    finally:
        cloud.api_url = None
    return f"failed {result.error_type}" if result.failed else "ran"


SCENARIOS: dict[str, Callable[[LocalCloud, LocalApi, FakeModel], str]] = {
    "cook": cook,
    "turned_away": turned_away,
    "reconciled": reconciled,
    "probed": probed,
    "synthetic": synthetic_run,
}


def _role_of(principal: Principal) -> str:
    """The role's logical id (its local name is the deployment's prefix, then the logical id)."""
    return principal.role.split("-", 1)[1]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return action if isinstance(action, list) else [action]


@pytest.fixture(scope="module")
def used(iam_cloud: LocalCloud, module_fake: FakeModel) -> dict[tuple[str, int], str]:
    """(role, statement index) -> the first scenario whose calls it allowed, every role as written."""
    gate, api = iam_cloud.server.gate, LocalApi(iam_cloud)
    gate.recording = True
    outcomes: dict[str, str] = {}
    out: dict[tuple[str, int], str] = {}
    try:
        for name, scenario in SCENARIOS.items():
            start = len(gate.allowed)
            outcomes[name] = scenario(iam_cloud, api, module_fake)
            _settle(iam_cloud)
            for allowed in gate.allowed[start:]:
                out.setdefault((allowed.role.split("-", 1)[1], allowed.statement), name)
    finally:
        gate.recording = False
    assert gate.refusals == [], [r.message for r in gate.refusals]
    assert outcomes == {
        "cook": "SUCCEEDED",
        "turned_away": "POST 429 TOO_MANY_JOBS",
        "reconciled": "FAILED",
        "probed": "ok",
        "synthetic": "ran",
    }, outcomes
    return out


def _statements(cloud: LocalCloud) -> list[tuple[str, int, Principal]]:
    return [(_role_of(p), i, p) for p in cloud.server.gate.principals.values() for i in range(len(p.statements))]


def test_every_statement_allows_a_call_and_nothing_is_refused(
    iam_cloud: LocalCloud, used: dict[tuple[str, int], str]
) -> None:
    unused = [
        (role, i, p.statements[i])
        for role, i, p in _statements(iam_cloud)
        if (role, i) not in used and not set(_actions(p.statements[i])) <= set(LOG_DELIVERY_ACTIONS)
    ]
    assert unused == []


def test_removing_any_statement_refuses_the_call_it_allowed(
    iam_cloud: LocalCloud, module_fake: FakeModel, used: dict[tuple[str, int], str]
) -> None:
    gate, api = iam_cloud.server.gate, LocalApi(iam_cloud)
    seen: list[tuple[str, str, str]] = []
    missed: list[tuple[str, str, str]] = []
    for role, index, principal in _statements(iam_cloud):
        statement = principal.statements[index]
        if set(_actions(statement)) <= set(LOG_DELIVERY_ACTIONS):  # checked when the state machine is created
            without = Role(role, [s for i, s in enumerate(principal.statements) if i != index])
            seen.append((role, "CreateStateMachine", f"refused: {', '.join(log_delivery_refused(without)[:1])}"))
            continue
        scenario = used[(role, index)]
        before = len(gate.refusals)
        iam_cloud.pool.retire_idle()  # cold sandboxes: a warm one keeps the key it read (Parameters caches it)
        principal.statements.pop(index)
        try:
            outcome = SCENARIOS[scenario](iam_cloud, api, module_fake)
            # The execution may still have calls to make after the job reads as ended (FreeSlot follows
            # Finalize): the statement stays out until it has made them.
            _executions_ended(iam_cloud)
        finally:
            principal.statements.insert(index, statement)
            _settle(iam_cloud)
        refused = [
            r
            for r in gate.refusals[before:]
            if r.principal is principal and r.authorisation.action in _actions(statement)
        ]
        (seen if refused else missed).append((role, scenario, outcome))
    assert missed == [], missed
    # docs/local-runner.md#strict-where-aws-is-strict: "removes each of the 20 statements in turn"
    assert len(seen) == 20
    print("\n".join(f"{role:28} {scenario:12} {outcome}" for role, scenario, outcome in seen))
