"""The AWS CLI, imported once and forked per command (run by the CLI's own venv: ``python aws_cli_server.py SOCKET``).

A runbook check runs ~40 ``aws`` commands; each fresh interpreter importing ``awscli`` cost ~0.4 s of CPU, 16 s a
run. Here the CLI's modules (its builtin plugin's too) are loaded once and each command is
``awscli.clidriver.main()`` in a fork, on the caller's own stdin, stdout and stderr (passed over the socket), in its
directory and environment: the same code on the same arguments, as a fresh ``aws`` would run it.
:mod:`tests.support.aws_cli_client` is the ``aws`` a script calls. Single-threaded, so forking is safe; children
are reaped by the kernel (SIGCHLD ignored).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys
import traceback

_BEFORE = dict(os.environ)
from awscli.clidriver import main  # noqa: E402  # the import a fork saves
from awscli.plugin import BUILTIN_PLUGINS  # noqa: E402

# And the builtin plugin module every command imports first (its customizations: ~0.2 s of CPU a command).
for _plugin in BUILTIN_PLUGINS.values():
    importlib.import_module(_plugin)

#: What importing the CLI sets in its environment (``AWS_DATA_PATH``, where its own data is): a fresh ``aws``
#: sets it on import, so each command gets it on top of the caller's.
SET_BY_IMPORT = {k: v for k, v in os.environ.items() if _BEFORE.get(k) != v}


def _run(conn: socket.socket) -> None:
    """In the fork: become the caller's ``aws`` process, run the command, send its exit status."""
    _, fds, _, _ = socket.recv_fds(conn, 1, 3)  # one byte carries the caller's stdin, stdout and stderr
    message = b""
    while chunk := conn.recv(1 << 16):  # then the request, to the caller's end of writing
        message += chunk
    request = json.loads(message)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({**request["env"], **SET_BY_IMPORT})
    sys.argv = ["aws", *request["args"]]
    try:
        status = main()
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    conn.sendall(str(status or 0).encode())


def serve(path: str) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        if os.fork() == 0:
            server.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                _run(conn)
            except BaseException:  # said where the caller sees it (its stderr, once received), or here
                traceback.print_exc()
                sys.stderr.flush()
            finally:
                os._exit(0)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
