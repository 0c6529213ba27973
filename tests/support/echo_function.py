"""The echo test double (``tests/lambdas/echo``) as a function the worker pool runs: it answers with the worker's
process id, and, asked to ``describe``, with what its process is made of."""

from __future__ import annotations

from pathlib import Path

from stack_template import FunctionSpec

ECHO = FunctionSpec(
    logical_id="EchoFunction",
    name="echo",
    code_dir=Path(__file__).parents[1] / "lambdas" / "echo",
    handler="app.lambda_handler",
    timeout_s=10,
    memory_mb=128,
    env={},
)
