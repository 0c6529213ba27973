"""``sam local invoke`` against the local cloud (``chuixiang cloud``), as far as it runs without Docker.

What SAM would do, done here: each function's handler runs in a fresh process from the built artifacts
(the function's code directory, as ``sam build`` copies it, and the layer that ``layers/shared/build_layer.py``
builds for ``sam build``), with exactly the variables the env-vars file gives it plus what SAM's Lambda
emulator sets, against the running local cloud, with the function's event file; each must answer as
``chuixiang invoke`` does. The env-vars file is checked against what ``--env-vars`` accepts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stack_template import Template

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.model.fake_model import FakeModel

from ..support.commands import run_cli
from ..support.serve import ROOT, free_port
from ..support.waiting import wait_until

sys.path.insert(0, str(ROOT / "layers" / "shared"))
import build_layer  # the build script, not a package

DOC = Template().doc
#: Each function with its sample event (the canary's needs CanaryModels set, so it is left to test_canary).
CASES = {
    "SubmitFunction": "submit.json",
    "RecipeFunction": "recipe.json",
    "ImageFunction": "image.json",
    "ReconcileFunction": "reconcile.json",
    "ApiFunction": "api-post.json",
}
#: What SAM's emulator puts in a function's environment besides the env-vars file (the runtime's too).
RUNNER = """
import importlib, json, os, sys, time
sys.path.insert(0, os.environ["LAMBDA_TASK_ROOT"])
module, name = os.environ["AWS_LAMBDA_FUNCTION_HANDLER"].rsplit(".", 1)
handler = getattr(importlib.import_module(module), name)
deadline = time.time() + int(os.environ["AWS_LAMBDA_FUNCTION_TIMEOUT"])
class Context:
    function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
    function_version = "$LATEST"
    memory_limit_in_mb = int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"])
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + function_name
    aws_request_id = "sam-local-request"
    log_group_name = log_stream_name = "sam-local"
    def get_remaining_time_in_millis(self):
        return max(0, int((deadline - time.time()) * 1000))
print("RESULT " + json.dumps(handler(json.load(open(sys.argv[1])), Context()), ensure_ascii=False))
"""


def declared(logical_id: str) -> set[str]:
    """The variables the template declares for a function: Globals, then its own."""
    globals_env = DOC["Globals"]["Function"]["Environment"]["Variables"]
    own = DOC["Resources"][logical_id]["Properties"].get("Environment", {}).get("Variables", {})
    return set(globals_env) | set(own)


@pytest.fixture(scope="module")
def sam_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    work = tmp_path_factory.mktemp("sam")
    env_file, state = work / "sam-env.json", work / "cloud.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chuixiang_local.commands.cli",
            "cloud",
            "--port",
            str(free_port()),
            "--model-port",
            str(free_port()),
            "--host-address",
            "127.0.0.1",
            "--env-vars",
            str(env_file),
            "--state",
            str(state),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: state.exists() or proc.poll() is not None, timeout_s=60, what="chuixiang cloud started")
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        yield {"env": json.loads(env_file.read_text()), "state": state, "work": work}
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """What ``sam build`` leaves: each function's CodeUri copied under its logical id, and the layer."""
    out = tmp_path_factory.mktemp("build")
    layer = build_layer.build(out / "SharedLayer" / "python", platform=None)
    built = {"layer": layer}
    for logical_id in CASES:
        code = ROOT / DOC["Resources"][logical_id]["Properties"]["CodeUri"]
        built[logical_id] = Path(shutil.copytree(code, out / logical_id))
    return built


def test_the_env_vars_file_is_what_sam_accepts_and_sets_every_declared_variable(sam_cloud: dict[str, Any]) -> None:
    env = sam_cloud["env"]
    functions = {lid for lid, r in DOC["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    assert isinstance(env, dict) and set(env) <= functions | {"Parameters"}
    for logical_id, values in env.items():
        assert isinstance(values, dict) and all(isinstance(v, str) for v in values.values()), logical_id
        # SAM sets only variables the template declares: the file must set exactly those, every one of them.
        assert set(values) == declared(logical_id), logical_id
    assert set(CASES) <= set(env)
    assert all(v["AWS_ENDPOINT_URL"].startswith("http://127.0.0.1:") for v in env.values())


def sam_invoke(logical_id: str, event: Path, env_file_values: dict[str, str], artifacts: dict[str, Path]) -> Any:
    spec = DOC["Resources"][logical_id]["Properties"]
    emulator = {
        "AWS_SAM_LOCAL": "true",
        "AWS_LAMBDA_FUNCTION_NAME": logical_id,
        "AWS_LAMBDA_FUNCTION_HANDLER": spec["Handler"],
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
        "AWS_LAMBDA_FUNCTION_TIMEOUT": "30",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "defaultkey",
        "AWS_SECRET_ACCESS_KEY": "defaultsecret",  # nosec B105  # SAM's own
        "LAMBDA_TASK_ROOT": str(artifacts[logical_id]),
        "PATH": os.environ["PATH"],
        # /opt/python (the layer) on the path; boto3 comes from this interpreter, standing in for the runtime's.
        "PYTHONPATH": str(artifacts["layer"]),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(event)],
        env={**env_file_values, **emulator},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=artifacts[logical_id],
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stderr[-3000:]
    return json.loads(line[len("RESULT ") :])


@pytest.fixture(scope="module")
def invoked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each case's event as ``chuixiang invoke`` answers it (``cmd_invoke``: a fresh local cloud, the job
    seeded, the function invoked), all five in one cloud: its start is what one ``invoke`` process spends."""
    work = tmp_path_factory.mktemp("invoke")
    out: dict[str, Any] = {}
    with (
        FakeModel() as fake,
        open(work / "log", "w") as log,
        LocalCloud({}, model_base_url=fake.base_url, work_dir=work, log=log) as cloud,
    ):
        for logical_id, name in CASES.items():
            event = json.loads((ROOT / "events" / name).read_text())
            cloud.seed_job_for(event)
            out[logical_id] = cloud.invoke(cloud.template.functions()[logical_id], event).payload
    return out


def shape(answer: Any) -> Any:
    """What must agree between two invocations of one event (ids and times differ)."""
    if isinstance(answer, dict) and "statusCode" in answer:
        return answer["statusCode"], sorted(json.loads(answer["body"]))
    if isinstance(answer, dict):
        return sorted(answer), answer.get("ok"), answer.get("valid"), answer.get("code")
    return type(answer).__name__


@pytest.mark.parametrize("logical_id", CASES)
def test_each_function_answers_under_sam_as_under_chuixiang_invoke(
    logical_id: str, sam_cloud: dict[str, Any], artifacts: dict[str, Path], invoked: dict[str, Any]
) -> None:
    event = ROOT / "events" / CASES[logical_id]
    seeded = run_cli("seed", "-e", str(event), "--state", str(sam_cloud["state"]), timeout=60)
    assert seeded.returncode == 0, seeded.stderr
    under_sam = sam_invoke(logical_id, event, sam_cloud["env"][logical_id], artifacts)
    assert not (isinstance(under_sam, dict) and "errorType" in under_sam), under_sam
    assert shape(under_sam) == shape(invoked[logical_id])
