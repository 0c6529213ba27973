"""The pipeline tier: the local cloud (moto, the real ASL, function processes) and whole commands."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import FakeModel
from chuixiang_local.workers.invoker import runner_env
from chuixiang_local.workers.zygote_root import ROOT_VARIABLE, ZygoteRoot

from ..support.scaled import SCALED, WHOLE


@pytest.fixture(scope="session", autouse=True)
def _zygote_root() -> Iterator[None]:
    """One root per test process: the clouds and ``serve`` processes it starts fork their worker zygotes from it
    (``chuixiang_local.workers.zygote_root``) instead of each loading boto3, Powertools and pydantic again
    (~0.35 s of CPU a zygote, ~150 zygotes a run)."""
    with ZygoteRoot(runner_env()) as root, pytest.MonkeyPatch.context() as patch:
        patch.setenv(ROOT_VARIABLE, root.path)
        yield


@pytest.fixture(scope="module")
def cloud(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    """The shared cloud, its jobs one stream each: its tests script the model per request (``WHOLE``)."""
    work = tmp_path_factory.mktemp("cloud")
    with (
        open(work / "functions.log", "w") as log,
        LocalCloud({**SCALED, **WHOLE}, model_base_url=module_fake.base_url, work_dir=Path(work), log=log) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def api(cloud: LocalCloud) -> LocalApi:
    return LocalApi(cloud)
