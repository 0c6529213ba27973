"""``aws`` for the runbook's scripts: the command goes to :mod:`tests.support.aws_cli_server` with this process's
stdin, stdout and stderr, and this process exits with its status. Run with ``-I -S`` (nothing imported but the
standard library it needs: ~20 ms). The runbook is written for the CLI's version 2 and PyPI has version 1; what
differs is adjusted here, and each call is recorded with the endpoint it went to (moto, or the stub for what moto
lacks)."""

from __future__ import annotations

import json
import os
import socket
import sys


def command(args: list[str]) -> list[str]:
    """The arguments version 1 runs, with the endpoint that answers this call."""
    if "--cli-binary-format" in args:  # version 2's switch to version 1's only behaviour
        at = args.index("--cli-binary-format")
        del args[at : at + 2]
    call = " ".join([a for a in args if not a.startswith("-")][:2])
    stubbed = call in json.loads(os.environ["RUNBOOK_STUBBED"])
    endpoint = os.environ["RUNBOOK_STUB" if stubbed else "RUNBOOK_MOTO"]
    with open(os.environ["RUNBOOK_CALLS"], "a") as calls:
        calls.write(json.dumps([call, stubbed]) + "\n")
    return ["--endpoint-url", endpoint, *args]


def main() -> int:
    request = {"args": command(sys.argv[1:]), "env": dict(os.environ), "cwd": os.getcwd()}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(os.environ["RUNBOOK_AWS_SERVER"])
        socket.send_fds(conn, [b"\n"], [0, 1, 2])
        conn.sendall(json.dumps(request).encode())
        conn.shutdown(socket.SHUT_WR)
        status = conn.recv(16)
    return int(status) if status else 1  # no status: the command's process died


if __name__ == "__main__":
    sys.exit(main())
