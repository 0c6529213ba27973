"""``python -m chuixiang_local.commands.launch``, as the Node tiers start ``serve``: the command the root forks
answers as a fresh one (with a root and without), the launcher passes SIGTERM on and ends as the command ended,
and a launcher killed leaves no command running (the root ends it). Real processes, under the roots
``tests/pipeline/conftest.py`` starts."""

from __future__ import annotations

import os
import signal
import subprocess  # nosec B404  # the launcher as Node starts it
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from chuixiang_local.commands.preload import CLI
from chuixiang_local.workers.zygote_root import COMMAND_ROOT_VARIABLE

from ..support.serve import ROOT, free_port, one_client, written
from ..support.waiting import wait_until

LAUNCH = "chuixiang_local.commands.launch"
#: Refused by the ladder: exit 2, a message on stderr (the same from a fork, an exec and a fresh command).
REFUSED = ("ladder", "--parameter-overrides", "RecipeTotalTimeoutMs=150000")


def _run(module: str, env: Mapping[str, str]) -> tuple[int, str, str]:
    done = subprocess.run(  # nosec B603  # this interpreter, our own module
        [sys.executable, "-m", module, *REFUSED], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("root", [True, False], ids=["forked", "no root: run here"])
def test_a_launched_command_answers_as_a_fresh_one(root: bool) -> None:
    env = dict(os.environ) if root else {k: v for k, v in os.environ.items() if k != COMMAND_ROOT_VARIABLE}
    launched = _run(LAUNCH, env)
    assert launched[0] == 2 and "not forked" not in launched[2]
    assert launched == _run(CLI, os.environ)


def _answers(http: httpx.Client, base: str) -> bool:
    try:
        http.get(f"{base}/recipes/none", timeout=1)
        return True
    except httpx.TransportError:
        return False


@contextmanager
def _launched_serve() -> Iterator[tuple[subprocess.Popen[bytes], str, tempfile._TemporaryFileWrapper[bytes]]]:
    """``serve`` through the launcher, answering; the launcher, the base URL and its stderr."""
    port = free_port()
    with tempfile.NamedTemporaryFile() as err, one_client() as http:
        launcher = subprocess.Popen(  # nosec B603  # this interpreter, our own module
            [sys.executable, "-m", LAUNCH, "serve", "--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: _answers(http, base), timeout_s=60, what="the launched serve answered", interval_s=0.2)
            yield launcher, base, err
        finally:
            if launcher.poll() is None:
                launcher.send_signal(signal.SIGTERM)
                launcher.wait(30)


def test_a_launched_serve_is_the_roots_fork_and_drains_on_the_launchers_sigterm() -> None:
    with _launched_serve() as (launcher, base, err), one_client() as http:
        children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split()
        assert children == [], "serve runs as the launcher's child: not forked by the root"
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=30) == 0
        said = written(err.file).decode()
        assert "draining" in said and "stopped" in said, said[-2000:]
        assert not _answers(http, base)


def test_a_killed_launcher_leaves_no_serve_behind() -> None:
    with _launched_serve() as (launcher, base, _), one_client() as http:
        launcher.kill()
        launcher.wait()
        wait_until(lambda: not _answers(http, base), timeout_s=15, what="the root ended the launcher's serve")


@pytest.mark.parametrize(("status", "returncode"), [(3, 3), (-signal.SIGTERM, -signal.SIGTERM)])
def test_the_launcher_ends_as_its_command_ended(status: int, returncode: int) -> None:
    """A command's exit code is the launcher's; a command killed by a signal: the launcher dies of the same one."""
    ended = subprocess.run(  # nosec B603  # this interpreter, our own module
        [sys.executable, "-c", f"from {LAUNCH} import end_as; end_as({status})"], cwd=ROOT, timeout=60, check=False
    )
    assert ended.returncode == returncode
