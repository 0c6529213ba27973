"""Shared fixtures: the scaled-down ladder, the fault-injecting model, the local cloud.

The scaled ladder comes from each limit's declaration (``chuixiang.timeouts``)
and is passed through the same template parameters production uses; tests read
every limit back from the template (``scaled_template``) instead of repeating
numbers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from chuixiang.timeouts import scaled_parameters
from chuixiang_local.api_client import LocalApi
from chuixiang_local.engine import LocalCloud, atomic_dynamodb
from chuixiang_local.fake_model import FakeModel
from chuixiang_local.template import Template

SCALED = scaled_parameters()
#: How late a give-up may be, measured on a real socket (the issue's bound).
LATE_S = 0.3

os.environ.pop("MODEL_API_KEY", None)


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


@pytest.fixture(scope="module")
def cloud(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    work = tmp_path_factory.mktemp("cloud")
    with open(work / "functions.log", "w") as log, \
            LocalCloud(SCALED, model_base_url=module_fake.base_url, work_dir=Path(work), log=log) as c:
        yield c


@pytest.fixture(scope="module")
def api(cloud: LocalCloud) -> LocalApi:
    return LocalApi(cloud)


@pytest.fixture(autouse=True)
def _reset_scripts(request: pytest.FixtureRequest) -> None:
    if "module_fake" in request.fixturenames:
        model: FakeModel = request.getfixturevalue("module_fake")
        model.chat_script.clear()
        model.image_script.clear()
        model.chat_by_model.clear()
        model.image_by_model.clear()
        model.requests.clear()
        model.bodies.clear()
    if "cloud" in request.fixturenames:
        request.getfixturevalue("cloud").reset_breakers()


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An in-process moto table (a local cloud that ran earlier may have left its endpoint in the env),
    its item operations atomic as DynamoDB's are (moto's are not under threads: ``atomic_dynamodb``)."""
    atomic_dynamodb()
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        yield ddb.create_table(TableName="jobs", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                               BillingMode="PAY_PER_REQUEST")
