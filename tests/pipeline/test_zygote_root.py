"""A zygote the root forks is a fresh zygote: the function sees the same process (environment, directory, path,
modules, niceness, session, output), a killed one is replaced, a pool whose loading would differ starts its own
and says why, and a root that ends leaves its zygotes to their pools. Real processes, as the pipeline tier runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess  # nosec B404  # our own interpreter, recording what the loading reads
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

from chuixiang_local.workers.invoker import WorkerPool, invoke, runner_env
from chuixiang_local.workers.zygote import IMPORT_ENV
from chuixiang_local.workers.zygote_root import (
    COMMAND_ROOT_VARIABLE,
    ROOT_VARIABLE,
    ForkedZygote,
    ZygoteRoot,
    loading_settings,
)

from ..support.echo_function import ECHO
from ..support.env_reads import variables_read_by_preload
from ..support.waiting import wait_until


def test_the_loading_reads_only_what_the_root_compares() -> None:
    """A fork is a fresh zygote only if the root compares every variable the loading reads: a new import that
    reads one more (a library upgrade) fails here until it is in ``IMPORT_ENV``."""
    read = variables_read_by_preload("chuixiang_local.workers.zygote")
    assert "HOME" in read  # the recording sees reads
    compared = {k for k in read if k.startswith(("PYTHON", "_PYTHON"))} | set(IMPORT_ENV)
    assert read <= compared, sorted(read - compared)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[TextIO]:
    with open(tmp_path / "workers.log", "w+") as file:
        yield file


def _said(log: TextIO) -> str:
    log.seek(0)
    return log.read()


def _pool(log: TextIO, env: dict[str, str] | None = None) -> WorkerPool:
    return WorkerPool(log, env=env or runner_env())


def _describe(pool: WorkerPool) -> dict[str, Any]:
    done = invoke(ECHO, {"describe": True}, pool=pool, layer_dirs=[], extra_env={})
    assert not done.failed, done.payload
    process: dict[str, Any] = done.payload["process"]
    return process


def test_a_function_forked_from_the_root_sees_the_process_a_fresh_zygote_gives(
    log: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    forked = _pool(log)
    try:
        assert isinstance(forked._zygote, ForkedZygote)
        from_root = _describe(forked)
    finally:
        forked.close()
    monkeypatch.delenv(ROOT_VARIABLE)
    fresh = _pool(log)
    try:
        assert isinstance(fresh._zygote, subprocess.Popen)
        own = _describe(fresh)
    finally:
        fresh.close()
    ours = {
        "chuixiang_local.workers.zygote",
        "chuixiang_local.workers.zygote_root",
    }  # the root's code, not the function's
    from_root["modules"] = sorted(set(from_root["modules"]) - ours)
    own["modules"] = sorted(set(own["modules"]) - ours)
    ids = {"CHUIXIANG_ZYGOTE_ID", "CHUIXIANG_WORKER_DIR"}  # each pool's own
    for process in (from_root, own):
        process["environ"] = {k: v for k, v in process["environ"].items() if k not in ids}
    assert from_root == own
    # Not unbuffered: a local cloud's functions share one log, where a print's text and its newline, written
    # apart, interleaved with another worker's line.
    assert own["session"] == os.getsid(0) and own["stdoutWriteThrough"] is False


def test_a_killed_forked_zygote_is_replaced_by_another_fork(log: TextIO) -> None:
    pool = _pool(log)
    try:
        first = pool._zygote
        assert isinstance(first, ForkedZygote)
        assert invoke(ECHO, {"n": 1}, pool=pool, layer_dirs=[], extra_env={}).init_ms is not None
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL  # the root reaped it and said how it ended
        assert pool.retire_idle() == 1  # its warm worker too: the next invocation is a cold start
        cold = invoke(ECHO, {"n": 2}, pool=pool, layer_dirs=[], extra_env={})
        assert not cold.failed and cold.init_ms is not None
        assert isinstance(pool._zygote, ForkedZygote) and pool._zygote.pid != first.pid and pool.zygotes_started == 2
    finally:
        pool.close()
    assert f"worker zygote {first.pid} exited (-9); starting another" in _said(log)


def test_a_pool_whose_loading_would_differ_starts_its_own_and_says_why(log: TextIO) -> None:
    pool = _pool(log, {**runner_env(), "AWS_CONFIG_FILE": os.devnull})
    try:
        assert isinstance(pool._zygote, subprocess.Popen)
        assert not invoke(ECHO, {"n": 1}, pool=pool, layer_dirs=[], extra_env={}).failed
    finally:
        pool.close()
    # Each root says why: the tests' two (the second is unbuffered as well).
    said = _said(log)
    assert said.startswith("worker zygote: loaded with another AWS_CONFIG_FILE; ")
    assert said.count("AWS_CONFIG_FILE") == 2
    assert said.endswith("; starting one of our own\n")


def test_a_root_that_ends_leaves_its_zygotes_to_their_pools(log: TextIO, monkeypatch: pytest.MonkeyPatch) -> None:
    with ZygoteRoot(runner_env()) as root:
        monkeypatch.setenv(ROOT_VARIABLE, root.path)
        pool = _pool(log)
    try:
        assert isinstance(pool._zygote, ForkedZygote)
        assert not invoke(ECHO, {"n": 1}, pool=pool, layer_dirs=[], extra_env={}).failed  # forked by a root now gone
        later = _pool(log)  # no root to answer: one of its own
        try:
            assert isinstance(later._zygote, subprocess.Popen)
        finally:
            later.close()
        zygote = pool._zygote
    finally:
        pool.close()
    wait_until(lambda: zygote.poll() is not None, timeout_s=10, what="the zygote ended with its pool")
    assert "did not answer" in _said(log)


def test_the_root_compares_what_it_was_loaded_with() -> None:
    """The settings a request is held to: the interpreter, directory and niceness of the asking process."""
    settings = loading_settings({"HOME": "/h", "PYTHONUNBUFFERED": "1", "MODEL_API_KEY": "k", "AWS_PROFILE": "p"})
    assert settings["env"] == {"HOME": "/h", "PYTHONUNBUFFERED": "1", "AWS_PROFILE": "p"}
    assert (settings["kind"], settings["executable"], settings["cwd"]) == ("zygote", sys.executable, os.getcwd())


def test_a_request_that_is_not_a_pools_is_refused_and_the_root_lives_on(log: TextIO) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as stranger, open(os.devnull, "rb") as null:
        stranger.settimeout(30)
        stranger.connect(os.environ[ROOT_VARIABLE].split(os.pathsep)[0])
        socket.send_fds(stranger, [b"not json"], [null.fileno()] * 3)
        assert "refused" in json.loads(stranger.recv(4096))
    pool = _pool(log)
    try:
        assert isinstance(pool._zygote, ForkedZygote)
    finally:
        pool.close()


def _python_with_roots(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m chuixiang_local.workers.with_roots python ARGS...``, as the Makefile runs the Node tiers (from a
    shell: no roots named yet)."""
    return subprocess.run(  # nosec B603  # our own interpreter
        [sys.executable, "-m", "chuixiang_local.workers.with_roots", sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k not in (ROOT_VARIABLE, COMMAND_ROOT_VARIABLE)},
    )


def test_a_command_run_with_the_roots_finds_them_live_and_ends_as_it_ended() -> None:
    """``python -m chuixiang_local.workers.with_roots CMD``: CMD finds the worker roots and the command root listening
    in their variables, its exit code is the wrapper's, and nothing of the roots is left once it ends (the Node
    tiers run under it)."""
    ran = _python_with_roots("-c", _PRINT_ROOTS, ROOT_VARIABLE, COMMAND_ROOT_VARIABLE)
    paths = ran.stdout.split()
    assert ran.returncode == 3, ran.stderr
    assert len(paths) == 3 and not any(os.path.exists(p) for p in paths)


def test_a_command_run_with_the_roots_under_roots_runs_under_the_same_ones() -> None:
    """The Makefile's Node lane runs both tiers under one set of roots, each tier's command wrapped again."""
    wrapped = [sys.executable, "-c", _PRINT_ROOTS, ROOT_VARIABLE, COMMAND_ROOT_VARIABLE]
    ran = subprocess.run(  # nosec B603  # our own interpreter
        [sys.executable, "-m", "chuixiang_local.workers.with_roots", *wrapped],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 3, ran.stderr
    assert ran.stdout.split() == [*os.environ[ROOT_VARIABLE].split(os.pathsep), os.environ[COMMAND_ROOT_VARIABLE]]


#: Prints the sockets the variables named in its arguments name; exits 3 if every one is a socket.
_PRINT_ROOTS = (
    "import os, stat, sys; paths = [p for v in sys.argv[1:] for p in os.environ[v].split(os.pathsep)]; "
    "print(*paths, sep='\\n'); sys.exit(3 if all(stat.S_ISSOCK(os.stat(p).st_mode) for p in paths) else 1)"
)


def test_a_command_killed_by_a_signal_ends_the_wrapper_as_a_shell_says_it() -> None:
    """A command killed by SIGTERM: the wrapper exits 143 (128 + 15), as a shell reports it, not Python's -15."""
    ran = _python_with_roots("-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert ran.returncode == 128 + signal.SIGTERM, ran.stderr
