"""Parent side of a local Lambda invocation: one fresh process per call, killed at Timeout.

A fresh process gives what ``sam local invoke`` gives - a cold start, the
template's environment, a real clock - plus the one thing tests of a timeout
ladder need: at ``Timeout`` the process is killed and the caller sees
``Sandbox.Timedout``, as Step Functions does in AWS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .template import FunctionSpec

#: Environment a Lambda process inherits from the runner (nothing else leaks in).
PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "PYENV_VERSION", "MODEL_API_KEY")


@dataclass
class Invocation:
    payload: Any
    error_type: str | None
    duration_ms: int

    @property
    def failed(self) -> bool:
        return self.error_type is not None


def invoke(spec: FunctionSpec, event: Any, *, layer_dirs: list[Path], extra_env: dict[str, str],
           log: TextIO | None = None) -> Invocation:
    started = time.time()
    deadline_ms = int(started * 1000) + spec.timeout_s * 1000
    request_id = str(uuid.uuid4())
    with tempfile.TemporaryDirectory(prefix="chuixiang-invoke-") as tmp:
        result_file = Path(tmp) / "result.json"
        env = {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}
        env.update(spec.env)
        env.update(extra_env)
        env.update({
            "_HANDLER": spec.handler,
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(spec.timeout_s),
            "CHUIXIANG_FUNCTION_ARN": spec.arn,
            "CHUIXIANG_DEADLINE_MS": str(deadline_ms),
            "CHUIXIANG_REQUEST_ID": request_id,
            "CHUIXIANG_RESULT_FILE": str(result_file),
            "PYTHONPATH": os.pathsep.join([str(spec.code_dir), *map(str, layer_dirs)]),
            "PYTHONUNBUFFERED": "1",
        })
        proc = subprocess.Popen(
            [sys.executable, "-m", "chuixiang_local.lambda_bootstrap"],
            stdin=subprocess.PIPE, stdout=log or subprocess.DEVNULL, stderr=log or subprocess.DEVNULL,
            env=env, cwd=spec.code_dir,
        )
        try:
            proc.communicate(json.dumps(event).encode(), timeout=max(0.0, deadline_ms / 1000 - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return Invocation({"errorType": "Sandbox.Timedout",
                               "errorMessage": f"{request_id} Task timed out after {spec.timeout_s:.2f} seconds"},
                              "Sandbox.Timedout", int((time.time() - started) * 1000))
        duration = int((time.time() - started) * 1000)
        if not result_file.exists():
            return Invocation({"errorType": "Runtime.ExitError",
                               "errorMessage": f"process exited with {proc.returncode} and no result"},
                              "Runtime.ExitError", duration)
        out = json.loads(result_file.read_text())
    if "error" in out:
        return Invocation(out["error"], out["error"]["errorType"], duration)
    return Invocation(out["result"], None, duration)
