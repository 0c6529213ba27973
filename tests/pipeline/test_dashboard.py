"""The dashboard and the alarms read exactly what the code emits.

Jobs go through the local cloud along every path that emits a metric (generated,
cached, image failure, reconciled, recipe failure opening a model's breaker, a
refused call, the canary); the functions' EMF documents are collected from their
output. Then, in the ``Chuixiang`` namespace:

* every metric on the dashboard and in an alarm is emitted with the same name and
  dimensions (a fixed ``service`` value, or the keys a ``SEARCH``/``SCHEMA`` names);
* every emitted metric (name and dimension keys) is on the dashboard;
* every metric name the code can emit was emitted here (so a new metric cannot hide
  from this test by not running).
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest
from stack_template import Template

from chuixiang.stores.admission import Admission, slot_key
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.commands import dashboard as dashboard_command
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, ImageBehaviour

from ..support.api_over_http import api_over_http
from ..support.commands import run_cli
from ..support.scaled import SCALED
from ..support.serve import free_port
from ..support.waiting import wait_until

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "Chuixiang"
#: (name, dimension keys, fixed dimension values or None when any value matches: SEARCH/SCHEMA)
Metric = tuple[str, frozenset[str], frozenset[tuple[str, str]] | None]


def emf_documents(log: str) -> Iterator[dict[str, Any]]:
    for line in log.splitlines():
        if '"_aws"' in line:
            doc = json.loads(line[line.index("{") :])
            if "CloudWatchMetrics" in doc.get("_aws", {}):
                yield doc


def emitted(log: str) -> set[Metric]:
    out: set[Metric] = set()
    for doc in emf_documents(log):
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            if directive["Namespace"] != NAMESPACE:  # what the local cloud vends for Lambda and Step Functions
                assert directive["Namespace"] in ("AWS/ApiGateway", "AWS/Lambda", "AWS/States"), directive
                continue
            for dims in directive["Dimensions"]:
                fixed = frozenset((k, str(doc[k])) for k in dims if k != "Model" and k != "Outcome")
                for metric in directive["Metrics"]:
                    out.add((metric["Name"], frozenset(dims), fixed))
    return out


SEARCH = re.compile(r"\{(?P<schema>[^}]+)\}\s+MetricName=\\?\"(?P<name>\w+)\\?\"")
SCHEMA = re.compile(r"SELECT \w+\((?P<name>\w+)\) FROM SCHEMA\((?P<schema>[^)]+)\)")


def from_expression(expression: str) -> Metric | None:
    match = SEARCH.search(expression) or SCHEMA.search(expression)
    if not match:
        return None
    namespace, *keys = [k.strip() for k in match["schema"].split(",")]
    return (match["name"], frozenset(keys), None) if namespace == NAMESPACE else None


def from_row(row: list[Any], previous: list[Any]) -> Metric | None:
    values = [previous[i] if v == "." else v for i, v in enumerate(row) if not isinstance(v, dict)]
    namespace, name, *dims = values
    if namespace != NAMESPACE:
        return None
    pairs = frozenset(zip(dims[::2], dims[1::2], strict=True))
    return name, frozenset(k for k, _ in pairs), pairs


def dashboard(template: Template) -> dict[str, Any]:
    body = template.doc["Resources"]["Dashboard"]["Properties"]["DashboardBody"]
    doc: dict[str, Any] = json.loads(template.resolve(body))
    return doc


def on_dashboard(template: Template) -> set[Metric]:
    out: set[Metric] = set()
    for widget in dashboard(template)["widgets"]:
        previous: list[Any] = []
        for row in widget["properties"].get("metrics", []):
            if isinstance(row[0], dict):
                metric = from_expression(row[0]["expression"])
            else:
                metric = from_row(row, previous)
                previous = [previous[i] if v == "." else v for i, v in enumerate(row)]
            if metric:
                out.add(metric)
    return out


def in_alarms(template: Template) -> set[Metric]:
    out: set[Metric] = set()
    for res in template.of_type("AWS::CloudWatch::Alarm").values():
        props = res["Properties"]
        stats = (
            [props]
            if "MetricName" in props
            else [{**m["MetricStat"]["Metric"]} for m in props.get("Metrics", []) if "MetricStat" in m]
        )
        for stat in stats:
            if stat["Namespace"] == NAMESPACE:
                pairs = frozenset((d["Name"], d["Value"]) for d in stat.get("Dimensions", []))
                out.add((stat["MetricName"], frozenset(k for k, _ in pairs), pairs))
        for m in props.get("Metrics", []):
            if "Expression" in m and isinstance(m["Expression"], str) and (metric := from_expression(m["Expression"])):
                out.add(metric)
    return out


def names_in_code() -> set[str]:
    """Every metric name the layer can emit: ``add_metric(name=...)``, ``model_metric("...")`` and
    ``dimensioned_metric("...")`` literals,
    f-strings with a prefix expanded for Recipe and Image."""
    names: set[str] = set()
    for path in (ROOT / "layers/shared/chuixiang").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            arg: ast.AST | None = None
            if func == "add_metric":
                arg = next((k.value for k in node.keywords if k.arg == "name"), None)
            elif func in ("model_metric", "dimensioned_metric") and node.args:
                arg = node.args[0]
            if isinstance(arg, ast.Constant):
                names.add(str(arg.value))
            elif isinstance(arg, ast.IfExp):
                names |= {str(b.value) for b in (arg.body, arg.orelse) if isinstance(b, ast.Constant)}
            elif isinstance(arg, ast.JoinedStr):
                suffix = "".join(str(v.value) for v in arg.values if isinstance(v, ast.Constant))
                names |= {f"Recipe{suffix}", f"Image{suffix}"}
    return names


@pytest.fixture(scope="module")
def mix_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The functions' log of a scripted mix: every path that emits a metric."""
    work = tmp_path_factory.mktemp("dashboard")
    # The breaker opens on one failure and stays open for the rest of the mix: at the scaled 2 s recovery a
    # loaded machine let the next job's call through as the half-open probe (CI stop 37: http_error, not
    # breaker_open). Recovery is the breaker tests' subject, not this one's.
    # The recipe stage's total limit 10 s (the function's and the state machine's with it, as the ladder asks):
    # the job stopped mid-stream must still be writing when the reconciler fails it, so that the stage is
    # abandoned, not timed out. At the scaled 3 s (1 s idle, keep-alives not counting) a moment's load lost that
    # race (the mix's RecipeAbandoned never emitted).
    overrides = {
        **SCALED,
        "RecipeTotalTimeoutMs": "10000",
        "RecipeFunctionTimeout": "12",
        "StateMachineTimeout": "80",
        "BreakerFailureThreshold": "1",
        "BreakerRecoverySeconds": "600",
        "CanaryModels": "canary-model",
    }
    with (
        FakeModel(pace_s=0.001) as fake,
        open(work / "log", "w") as log,
        LocalCloud(overrides, model_base_url=fake.base_url, work_dir=work, log=log) as cloud,
    ):
        api = LocalApi(cloud)

        def cook(dish: str) -> dict[str, Any]:
            return api.wait(api.post_dish(dish)[1]["jobId"], give_up_s=30)

        for _ in range(2):  # generated (a cache miss), then the same dish again (a cache hit)
            doc = cook("看板菜")
            assert doc["status"] == "SUCCEEDED", doc.get("error")
        with api_over_http(api) as cloud.api_url:  # the synthetic job: a dish through the API over HTTP
            synthetic = cloud.invoke(cloud.template.function_by_dir("synthetic"), {})
        assert not synthetic.failed and not synthetic.payload["failing"], synthetic.payload
        fake.chat_script.append(ChatBehaviour(kind="error_mid"))  # tokens written, then the stream fails: wasted
        wasted = cook("看板浪费")["metrics"]["recipe"]["calls"]
        assert any(c["outcome"] != "ok" and c.get("completionTokens") for c in wasted), wasted
        fake.image_script.append(ImageBehaviour(status=400))
        assert cook("看板图坏")["imageError"] is not None
        fake.chat_script.append(ChatBehaviour(chunk_delay_s=0.2))  # writes, slowly, until the total limit
        job = api.post_dish("看板中止")[1]["jobId"]
        # Stopped mid-stream, not before its call: a behaviour left unused went to a later call (the canary's).
        wait_until(lambda: not fake.chat_script, timeout_s=30, what="the aborted job's call reached the model")
        arn = cloud.execution_arn(job)
        sfn = cloud.client("stepfunctions")
        assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
        sfn.stop_execution(executionArn=arn, error="Operator", cause="dashboard test")  # aborted by an operator
        assert api.wait(job, give_up_s=30)["status"] == "FAILED"
        wait_until(
            lambda: "recipe abandoned: the job ended first" in (work / "log").read_text(),
            timeout_s=30,
            what="the recipe stage saw its job end and gave up its call",
        )
        model = cloud.template.parameters["RecipeModel"]
        fake.chat_by_model[model] = ChatBehaviour(status=503)
        assert cook("看板熔断1")["error"]["code"] == "RECIPE_UPSTREAM_ERROR"  # opens the breaker (threshold 1)
        refused = cook("看板熔断2")
        assert [c["outcome"] for c in refused["metrics"]["recipe"]["calls"]][:1] == ["breaker_open"]
        del fake.chat_by_model[model]
        # The canary's probe writes, then stalls past the idle limit: its first content, writing rate, an
        # invalid probe and tokens wasted, each tagged Source=canary.
        fake.chat_by_model["canary-model"] = ChatBehaviour(stall_after_chunks=2, stall_s=20, keepalive_every_s=0.1)
        probe = cloud.invoke(cloud.template.function_by_dir("canary"), {"models": ["canary-model"], "dish": "番茄炒蛋"})
        assert not probe.failed, probe.payload
        # The synthetic job finds no API where it looks: two api_errors, a failing run.
        cloud.api_url = f"http://127.0.0.1:{free_port()}"
        synthetic = cloud.invoke(cloud.template.function_by_dir("synthetic"), {})
        assert not synthetic.failed and synthetic.payload["failing"], synthetic.payload
        _turned_away(cloud, api)
        _served_degraded(fake, log, work)
    return work / "log"


def _served_degraded(fake: FakeModel, log: TextIO, work: Path) -> None:
    """A recipe written in sections whose extras fail (RecipeSections=parallel, a cloud of its own)."""
    fake.chat_by_section["extras"] = ChatBehaviour(status=503)
    overrides = {**SCALED, "RecipeSections": "parallel"}
    with LocalCloud(overrides, model_base_url=fake.base_url, work_dir=work / "parallel", log=log) as cloud:
        api = LocalApi(cloud)
        job = api.wait(api.post_dish("看板分段")[1]["jobId"], give_up_s=30)
        assert job["status"] == "SUCCEEDED" and job["degraded"] == ["extras"], job
        # An outline answered with the whole recipe: the sections abandoned, the recipe written whole after them.
        fake.chat_by_section["outline"] = ChatBehaviour(kind="whole_recipe")
        try:
            job = api.wait(api.post_dish("看板整写")[1]["jobId"], give_up_s=30)
        finally:
            fake.chat_by_section.clear()
        assert job["status"] == "SUCCEEDED" and job["metrics"]["recipe"]["wholeAfter"] == "shape", job


@pytest.fixture(scope="module")
def emitted_metrics(mix_log: Path) -> set[Metric]:
    return emitted(mix_log.read_text())


def test_every_widget_of_the_dashboard_has_data_from_the_mix(mix_log: Path, tmp_path: Path) -> None:
    """``chuixiang dashboard --strict`` over the mix's log: every metric widget has data, the AWS rows too
    (from what the local cloud vends), and it draws the dashboard; over an empty log it fails."""
    widgets = dashboard_command.build(Template(), dashboard_command.read_points([mix_log]))
    assert [w.title for w in widgets if not w.has_data] == []
    assert len([w for w in widgets if w.kind == "metric"]) >= 15
    png = ROOT / "docs" / "dashboard.png" if os.environ.get("UPDATE_DASHBOARD") else tmp_path / "dashboard.png"
    cli = ["dashboard", "--strict"]
    drawn = run_cli(*cli, "--logs", str(mix_log), "--out", str(png))
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr
    assert png.read_bytes().startswith(b"\x89PNG") and "NO DATA" not in drawn.stdout
    (tmp_path / "empty.log").write_text("")
    empty = run_cli(*cli, "--logs", str(tmp_path / "empty.log"))
    assert empty.returncode == 1 and "NO DATA" in empty.stdout


def _turned_away(cloud: LocalCloud, api: LocalApi) -> None:
    """Every slot held by another caller: a POST gets 429 (the api function runs in this process, LocalApi,
    its stdout, the EMF, into the functions' log with the rest)."""
    table, limit = cloud.job_store().table, int(cloud.template.parameters["RecipeConcurrency"])
    for n in range(limit):
        assert isinstance(Admission(table, limit).admit(f"held-{n}", "another-caller", 2**31), int)
    try:
        assert api.post_dish("看板排队")[0] == 429
    finally:
        for n in range(limit):
            table.delete_item(Key=slot_key(n))


def covers(wanted: Metric, emitted_metrics: set[Metric]) -> bool:
    name, keys, fixed = wanted
    return any(
        n == name and k == keys and (fixed is None or (f is not None and fixed <= f)) for n, k, f in emitted_metrics
    )


def test_every_metric_on_the_dashboard_and_in_alarms_is_emitted(emitted_metrics: set[Metric]) -> None:
    template = Template()
    for metric in on_dashboard(template) | in_alarms(template):
        assert covers(metric, emitted_metrics), f"{metric} is read but never emitted so"


def test_every_emitted_metric_is_on_the_dashboard(emitted_metrics: set[Metric]) -> None:
    shown = {(name, keys) for name, keys, _ in on_dashboard(Template())}
    missing = {(name, tuple(sorted(keys))) for name, keys, _ in emitted_metrics} - {
        (name, tuple(sorted(keys))) for name, keys in shown
    }
    assert not missing, f"emitted but on no widget: {sorted(missing)}"
    assert names_in_code() <= {name for name, _, _ in emitted_metrics}, "a metric the code emits was not exercised"
    assert len(names_in_code()) >= 18  # the scan found them (20 when written)


def test_the_latency_widget_draws_the_limits_from_the_parameters() -> None:
    template = Template(
        {"RecipeFirstContentTimeoutMs": "50000", "RecipeIdleTimeoutMs": "25000", "RecipeTotalTimeoutMs": "110000"}
    )
    widget = next(
        w for w in dashboard(template)["widgets"] if w["properties"].get("title") == "Stage latency (ms, p90)"
    )
    lines = {a["label"].split(" (")[0]: a["value"] for a in widget["properties"]["annotations"]["horizontal"]}
    assert lines == {"first-content limit": 50000, "idle limit": 25000, "total limit": 110000}
