"""What a local cloud start imports: not Batch's and EC2's backends, which the ASL parser's one Batch enum
pulled in (about 1 s of every ``serve``, ``cook`` and ``invoke``); and Batch still works for whoever asks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi

from ..support.scaled import SCALED
from ..support.serve import ROOT

PROBE = textwrap.dedent(
    """
    import sys
    from chuixiang_local.cloud.moto_patches import apply_patches
    apply_patches()
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend  # the ASL parser, whole
    from moto.batch.utils import JobStatus
    print("ec2 at start:", "moto.ec2" in sys.modules, "batch backend at start:", "moto.batch.models" in sys.modules)
    import moto.batch
    backends = moto.batch.batch_backends  # what moto's server asks the package for
    print("batch backend on use:", "moto.batch.models" in sys.modules, type(backends).__name__)
    """
)


def test_the_asl_parser_no_longer_imports_batch_and_ec2_and_batch_still_loads_on_use() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "ec2 at start: False batch backend at start: False", done.stdout
    assert lines[1] == "batch backend on use: True BackendDict", done.stdout


def test_a_stopped_cloud_gives_the_process_its_environment_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-process api function (``LocalApi``) makes this process look like it (``AWS_ENDPOINT_URL``, the
    table's name…); once the cloud stops, what it replaced is back, so nothing after it talks to a dead moto."""
    monkeypatch.setenv("JOBS_TABLE", "what-was-there")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with LocalCloud(SCALED, model_base_url="http://127.0.0.1:9/v1", work_dir=tmp_path) as cloud:
        LocalApi(cloud)
        assert os.environ["AWS_ENDPOINT_URL"] == cloud.endpoint
        assert os.environ["JOBS_TABLE"] != "what-was-there"
    assert "AWS_ENDPOINT_URL" not in os.environ and os.environ["JOBS_TABLE"] == "what-was-there"
