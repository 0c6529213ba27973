"""What tracing adds to a cold start: importing ``chuixiang.tracing`` and sending the first subsegment, against
importing the X-Ray SDK and patching botocore with it (what Powertools Tracer does at init).

Each figure is measured in a fresh interpreter (a cold start imports everything once) that has imported boto3
already (every function does, traced or not), ``RUNS`` times; the median is printed. Both send to a UDP port
nobody reads (the daemon's place), with a sampled trace header.

    .venv/bin/python bench/tracing_cold_start.py
"""

from __future__ import annotations

import subprocess  # nosec B404  # its error, raised by a fresh interpreter

from fresh_interpreters import median_ms

RUNS = 15
ENV = {
    "PATH": "/usr/bin:/bin",
    "AWS_XRAY_DAEMON_ADDRESS": "127.0.0.1:9",
    "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
}
OURS = """
import time
import boto3  # every function imports it anyway: not counted
t = time.perf_counter()
from chuixiang.tracing import span
with span("model call", model="m"):
    pass
print((time.perf_counter() - t) * 1000)
"""
SDK = """
import time
import boto3  # every function imports it anyway: not counted
t = time.perf_counter()
from aws_xray_sdk.core import patch, xray_recorder
patch(["botocore"])
print((time.perf_counter() - t) * 1000)
"""


def main() -> None:
    print(f"cold start cost, median of {RUNS} fresh interpreters:")
    print(f"  chuixiang.tracing: import + first subsegment sent   {median_ms(OURS, ENV, RUNS):7.1f} ms")
    try:
        print(f"  aws_xray_sdk: import + patch(['botocore'])          {median_ms(SDK, ENV, RUNS):7.1f} ms")
    except subprocess.CalledProcessError as exc:
        print(f"  aws_xray_sdk: not measured ({exc.stderr.strip().splitlines()[-1]})")


if __name__ == "__main__":
    main()
