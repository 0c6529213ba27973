"""What a local cloud start imports: not Batch's and EC2's backends, which the ASL parser's one Batch enum
pulled in (about 1 s of every ``serve``, ``cook`` and ``invoke``); and Batch still works for whoever asks."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
