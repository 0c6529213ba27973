"""``chuixiang <args>`` run to its end, as ``subprocess.run([python, -m, chuixiang_local.commands.cli, ...])`` runs it.

Forked by the tests' command root when there is one (``tests/pipeline/conftest.py``): the same code on the same
arguments, environment, directory and streams, without ~1.8 s of CPU importing moto and the runner a command. A
root that would not give a fresh command (another environment where the imports read it) says why, and the command
is started as a user starts it.
"""

from __future__ import annotations

import locale
import os
import signal
import subprocess  # nosec B404  # our own CLI, by this interpreter
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from chuixiang_local.cloud.local_cloud import environment_before_activation
from chuixiang_local.commands.preload import CLI
from chuixiang_local.workers.zygote_root import ForkedZygote

from .command_root import fork_or_say
from .serve import ROOT, written
from .waiting import wait_until


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, cwd: Path = ROOT, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The command's exit code, stdout and stderr (text); ``subprocess.TimeoutExpired`` past ``timeout``. Its
    environment: ``env``, or this process's as from the shell (without an in-process cloud's api settings)."""
    environment = environment_before_activation() if env is None else dict(env)
    done = forked_cli(*args, env=environment, cwd=cwd, timeout=timeout)
    return done or subprocess.run(  # nosec B603  # this interpreter, our own module
        [sys.executable, "-m", CLI, *args], capture_output=True, text=True, env=environment, cwd=cwd, timeout=timeout
    )


def start_cli(*args: str, stderr: int) -> subprocess.Popen[bytes] | ForkedZygote:
    """``chuixiang <args>`` started (forked by the command root if it will), its stderr to ``stderr`` (a descriptor,
    the caller's to close), stdin and stdout empty; for a command a test watches and stops itself."""
    environment = environment_before_activation()
    with open(os.devnull, "rb") as stdin, open(os.devnull, "wb") as stdout:
        forked = fork_or_say(args, environment, [stdin.fileno(), stdout.fileno(), stderr], ROOT)
        return forked or subprocess.Popen(  # nosec B603  # this interpreter, our own module
            [sys.executable, "-m", CLI, *args], stdout=subprocess.DEVNULL, stderr=stderr, env=environment, cwd=ROOT
        )


def forked_cli(
    *args: str, env: Mapping[str, str], cwd: Path = ROOT, timeout: float = 120, interrupt_when: str | None = None
) -> subprocess.CompletedProcess[str] | None:
    """:func:`run_cli` forked by the command root, or None without one or when it refuses (said on stderr);
    ``interrupt_when``: SIGINT (Ctrl-C) once the command has said this on stderr."""
    with (
        open(os.devnull, "rb") as stdin,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        forked = fork_or_say(args, env, [stdin.fileno(), out.fileno(), err.fileno()], cwd)
        if forked is None:
            return None
        try:
            if interrupt_when:
                wait_until(lambda: interrupt_when in _text(err), timeout_s=timeout, what=interrupt_when)
                forked.send_signal(signal.SIGINT)
            code = forked.wait(timeout)
        finally:  # a timeout (or any failure here) leaves no command behind
            if forked.poll() is None:
                forked.kill()
                forked.wait()
        return subprocess.CompletedProcess([sys.executable, "-m", CLI, *args], code, _text(out), _text(err))


def _text(file: IO[bytes]) -> str:
    """What ``text=True`` makes of a stream: the locale's encoding, universal newlines."""
    data = written(file).decode(locale.getpreferredencoding(False))
    return data.replace("\r\n", "\n").replace("\r", "\n")
