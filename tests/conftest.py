"""Shared fixtures: the scaled-down ladder, the fault-injecting model, the local cloud.

The scaled ladder comes from each limit's declaration (``chuixiang.timeouts``)
and is passed through the same template parameters production uses; tests read
every limit back from the template (``scaled_template``) instead of repeating
numbers.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from _pytest.unraisableexception import gc_collect_iterations_key
from moto import mock_aws
from stack_template import Template

from chuixiang_local.cloud.moto_patches import atomic_dynamodb
from chuixiang_local.model.fake_model import FakeModel

from .support.scaled import SCALED

#: Each folder is a tier; its marker is set from the folder, so ``-m`` and the folder always agree.
TIERS = ("unit", "runner", "sockets", "pipeline")

os.environ.pop("MODEL_API_KEY", None)


def pytest_configure(config: pytest.Config) -> None:
    """One garbage collection at the session's end, not pytest's five: they run the finalizers of what is left, so
    that an exception raised in one is reported (unraisable), and the first finds that garbage. With a local
    cloud's heap (botocore's models, moto's backends) the five took ~3 s of each test process's CPU, at the end
    of its lane."""
    config.stash[gc_collect_iterations_key] = 1


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a module's last test and its fixtures' teardown: one collection of what it left, then everything
    that outlived it frozen (``gc.freeze``), so the collector never walks it again. A test process holds the
    modules, botocore's models and moto's backends of every earlier module; a full collection over that heap took
    ~0.7 s, every thread of the process stopped meanwhile (the fake model's and the recipe stage's of a sockets test
    in the waiting lane, whose scaled limits are 1.5 s)."""
    yield
    if nextitem is None or nextitem.path != item.path:
        gc.collect()
        gc.freeze()


def pytest_itemcollected(item: pytest.Item) -> None:
    """Each test's tier marker (and ``waiting`` for every sockets test), set as it is collected: before ``-m``
    selects on them."""
    tier = next((t for t in TIERS if f"{os.sep}tests{os.sep}{t}{os.sep}" in str(item.path)), None)
    if tier is None:
        raise pytest.UsageError(f"{item.nodeid}: every test lives in a tier's folder ({', '.join(TIERS)})")
    item.add_marker(tier)
    if tier == "sockets":
        item.add_marker("waiting")


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules marked ``long_module`` first, each group in pytest-randomly's order: pytest-xdist hands out files
    in collection order, so the last ones a worker gets are short and no worker is left with a long file alone at
    the end (the longest take 20-70 s)."""
    items.sort(key=lambda item: item.get_closest_marker("long_module") is None)


@pytest.fixture(autouse=True)
def _no_metrics_left_by_an_earlier_test() -> None:
    """Powertools' Metrics buffer is the process's, flushed by a handler's ``log_metrics``: a test that runs a step
    or ``run_synthetic`` directly (no handler) left its metrics for the next handler's flush in this worker (a
    synthetic run's ``SyntheticFailures`` then read 2)."""
    from chuixiang.observability import metrics

    metrics.clear_metrics()


@pytest.fixture(scope="session")
def scaled_template() -> Template:
    return Template(SCALED)


@pytest.fixture
def fake() -> Iterator[FakeModel]:
    with FakeModel(pace_s=0.001) as model:
        yield model


@pytest.fixture(scope="module")
def module_fake() -> Iterator[FakeModel]:
    with FakeModel(pace_s=0.001) as model:
        yield model


@pytest.fixture(autouse=True)
def _reset_scripts(request: pytest.FixtureRequest) -> None:
    if "module_fake" in request.fixturenames:
        model: FakeModel = request.getfixturevalue("module_fake")
        model.chat_script.clear()
        model.image_script.clear()
        model.chat_by_model.clear()
        model.chat_by_section.clear()
        model.image_by_model.clear()
        model.requests.clear()
        model.sections.clear()
        model.faults.clear()
        model.most_open = 0
        with model.lock:  # a late hang-up of the test before appends to the three together
            model.hung_up.clear()
            model.hung_up_sections.clear()
            model.hung_up_asked.clear()
        model.answered.clear()
        model.bodies.clear()
    if "cloud" in request.fixturenames:
        request.getfixturevalue("cloud").reset_breakers()


@pytest.fixture
def in_process_aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto in this process, as code that builds its own clients finds it: no endpoint a local cloud that ran
    earlier in the process left in the environment, test credentials, one region."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        # moto sets boto3's default session aside for the test (a new one per test: ~60-150 ms of loading
        # service models whenever code makes its first client); one made under the same environment serves all.
        boto3.DEFAULT_SESSION = _session()
        yield


_SESSIONS: list[boto3.Session] = []


def _session() -> boto3.Session:
    if not _SESSIONS:
        _SESSIONS.append(boto3.Session())
    return _SESSIONS[0]


@pytest.fixture
def table(in_process_aws: None) -> Any:
    """An in-process moto table, its item operations atomic as DynamoDB's are (moto's are not under threads:
    ``atomic_dynamodb``)."""
    atomic_dynamodb()
    ddb = boto3.resource("dynamodb", region_name="us-east-1")
    return ddb.create_table(
        TableName="jobs",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
