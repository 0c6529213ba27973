"""The pipeline tier: the local cloud (moto, the real ASL, function processes) and whole commands."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import FakeModel
from chuixiang_local.workers.with_roots import all_roots
from chuixiang_local.workers.zygote_root import COMMAND_ROOT_VARIABLE, ROOT_VARIABLE

from ..support.scaled import SCALED, WHOLE
from ..support.serve import ROOT


@pytest.fixture(scope="session", autouse=True)
def _zygote_root() -> Iterator[None]:
    """Roots per test process: the clouds and ``serve`` processes it starts fork their worker zygotes from them
    (``chuixiang_local.workers.with_roots``) instead of each loading boto3, Powertools and pydantic again (~0.35 s
    of CPU a zygote, ~150 zygotes a run). And one of commands: ``serve`` (``tests/support/serve.py``) is
    forked from it instead of importing moto, Flask and the runner again (~1.8 s of CPU a command, ~25 a run).
    Run under roots already (``make test`` starts one set for all its lanes), the same ones: each set costs
    ~4 s of CPU to load."""
    if ROOT_VARIABLE in os.environ and COMMAND_ROOT_VARIABLE in os.environ:
        yield
        return
    with all_roots(os.environ, cwd=str(ROOT)) as env, pytest.MonkeyPatch.context() as patch:
        for name in (ROOT_VARIABLE, COMMAND_ROOT_VARIABLE):
            patch.setenv(name, env[name])
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
