"""The local Lambda workers survive the faults a developer's machine throws at them, found by killing the
real processes on purpose: a killed zygote is replaced, a worker that died idle is never handed a request,
the thread that stands in for EventBridge outlives any one failure, a zygote slow to start (a busy machine)
is not counted as a function's init, and a dead worker's kill never reaches the process that took its pid."""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess  # nosec B404  # sleeping processes of our own
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chuixiang_local import LAMBDA_GC_THRESHOLDS
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel
from chuixiang_local.workers import invoker
from chuixiang_local.workers.invoker import Worker, WorkerPool, invoke

from ..support.echo_function import ECHO
from ..support.waiting import wait_until


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[WorkerPool]:
    with open(tmp_path / "workers.log", "w") as log:
        workers = WorkerPool(log, env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(sys.path)})
        try:
            yield workers
        finally:
            workers.close()


def _echo(pool: WorkerPool, n: int) -> tuple[int, int | None]:
    done = invoke(ECHO, {"n": n}, pool=pool, layer_dirs=[], extra_env={})
    assert not done.failed, done.payload
    return int(done.payload["pid"]), done.init_ms


def test_a_function_collects_garbage_as_in_lambda_not_as_the_runner(pool: WorkerPool) -> None:
    """The runner's processes collect rarely (``chuixiang_local``); a function's process, forked from the zygote,
    has CPython's thresholds again, as Lambda's runtime has: its memory is what it would use there."""
    done = invoke(ECHO, {"n": 1}, pool=pool, layer_dirs=[], extra_env={})
    assert gc.get_threshold() != LAMBDA_GC_THRESHOLDS  # this process imported the runner
    assert tuple(done.payload["gcThresholds"]) == LAMBDA_GC_THRESHOLDS == (700, 10, 10)


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_zygote_still_loading_is_waited_for_and_not_counted_as_the_functions_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda's init limit (here 1 s) times the function's init, not this emulator's start: a zygote stopped
    before it has loaded its modules (as a starved one is, for seconds, on a busy machine) for longer than the
    limit, then let go, gives a cold start whose init is within it (timed from the request: Runtime.InitTimeout)."""
    monkeypatch.setattr(invoker, "INIT_LIMIT_S", 1.0)
    with open(tmp_path / "workers.log", "w") as log:
        workers = WorkerPool(log, env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(sys.path)})
        try:
            os.kill(workers._zygote.pid, signal.SIGSTOP)  # it takes ~0.3 s to load: stopped before it is ready
            done: list[tuple[int, int | None]] = []
            cold = threading.Thread(target=lambda: done.append(_echo(workers, 1)))
            cold.start()
            threading.Event().wait(1.5)  # stopped past the init limit, while the cold start waits
            assert not done and not workers._zygote_ready.is_set()
            os.kill(workers._zygote.pid, signal.SIGCONT)
            cold.join(timeout=30)
            [(_, init_ms)] = done
            assert init_ms is not None and init_ms < 1000, init_ms
        finally:
            workers.close()


def test_a_killed_zygote_is_replaced_and_the_next_cold_start_works(pool: WorkerPool) -> None:
    first, init = _echo(pool, 1)
    assert init is not None  # a cold start, forked from the zygote
    zygote = pool._zygote.pid
    os.kill(zygote, signal.SIGKILL)
    pool._zygote.wait(10)
    warm, init = _echo(pool, 2)  # the warm worker does not need the zygote
    assert (warm, init) == (first, None)
    os.kill(warm, signal.SIGKILL)  # the next invocation must be a cold start: from a new zygote
    wait_until(lambda: _dead(warm), timeout_s=5, what="the worker to die")
    cold, init = _echo(pool, 3)
    assert init is not None and cold != first
    assert pool.zygotes_started == 2 and pool._zygote.pid != zygote


def _parent(pid: int) -> int:
    """A process's parent, from /proc (a worker's is its function's zygote)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_killed_function_zygote_is_replaced_and_the_main_zygote_lives(pool: WorkerPool) -> None:
    """Before, the main zygote wrote the next request into the dead function zygote's pipe, died of the broken
    pipe, and every later cold start of every function failed (after the 10 s init limit each)."""
    first, _ = _echo(pool, 1)
    function_zygote = _parent(first)
    assert function_zygote != pool._zygote.pid
    os.kill(function_zygote, signal.SIGKILL)
    os.kill(first, signal.SIGKILL)  # and its warm worker: the next invocation is a cold start
    wait_until(lambda: _dead(first) and _dead(function_zygote), timeout_s=5, what="the zygote and worker to die")
    cold, init = _echo(pool, 2)
    assert init is not None and cold != first and _parent(cold) != function_zygote
    assert pool._zygote.poll() is None and pool.zygotes_started == 1  # the main zygote lived on


def test_a_worker_that_died_idle_is_never_handed_a_request(pool: WorkerPool) -> None:
    first, _ = _echo(pool, 1)
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: _dead(first), timeout_s=5, what="the idle worker to die")
    # Without the check, this invocation went to the dead worker and failed with Runtime.ExitError.
    second, init = _echo(pool, 2)
    assert second != first and init is not None


def test_the_eventbridge_stand_in_survives_any_one_failure(
    cloud: LocalCloud, api: LocalApi, module_fake: FakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing the executions fails once, then describing the stopped one fails once: the job is still
    reconciled (before, the first failure ended the watcher thread and every later job stayed RUNNING)."""
    failures = {"list": 1, "describe": 1}

    def flaky(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if failures[name]:
                failures[name] -= 1
                raise RuntimeError(f"injected {name} failure")
            return real(*args)

        return call

    monkeypatch.setattr(cloud.executions, "ended_badly", flaky("list", cloud.executions.ended_badly))
    monkeypatch.setattr(cloud.executions, "describe", flaky("describe", cloud.executions.describe))
    module_fake.chat_script.append(ChatBehaviour(headers_delay_s=30))
    job_id = api.post_dish("被打断的菜")[1]["jobId"]
    wait_until(lambda: module_fake.count("/chat/completions"), timeout_s=15, what="the recipe call reached the model")
    arn = cloud.execution_arn(job_id)
    cloud.client("stepfunctions").stop_execution(executionArn=arn, error="Operator", cause="test")
    wait_until(lambda: cloud.reconciled(arn), timeout_s=15, what="the reconciler handled the stopped execution")
    assert failures == {"list": 0, "describe": 0}
    doc = api.get(job_id)[1]
    assert doc["status"] == "FAILED" and doc["error"]["code"] == "JOB_STOPPED"
    assert cloud.eventbridge is not None and cloud.eventbridge.alive()


SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
ECHO_LINES = [sys.executable, "-c", "import sys\nfor line in sys.stdin: print(line, end='', flush=True)"]


@pytest.fixture
def connection() -> Iterator[socket.socket]:
    ours, theirs = socket.socketpair()
    yield ours
    theirs.close()


def test_a_dead_workers_kill_never_reaches_the_process_that_took_its_pid(connection: socket.socket) -> None:
    """Workers are reaped as they exit and ``pid_max`` is 32,768 here, which a ``make test`` (~3,000 processes a
    minute) goes round in minutes: a dead worker's pid can come back as another test's worker, and a kill by that
    number would end it mid-invocation (Runtime.ExitError, no traceback)."""
    first = subprocess.Popen(SLEEP)  # nosec B603
    worker = Worker(("Fn",), connection, first.pid, b"")
    first.kill()
    first.wait()  # reaped: its pid is free
    other = subprocess.Popen(ECHO_LINES, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # nosec B603
    assert other.stdin is not None and other.stdout is not None  # nosec B101
    try:
        worker.pid = other.pid  # what pid reuse does: the number now names another process
        worker.kill()
        # A process with a SIGKILL pending never runs user code again: an answer now means it was not sent one.
        other.stdin.write(b"still here?\n")
        other.stdin.flush()
        assert other.stdout.readline() == b"still here?\n", "the kill went to the process that took the pid"
    finally:
        other.kill()
        other.wait()


def test_a_live_worker_is_killed_and_a_second_kill_does_nothing(connection: socket.socket) -> None:
    process = subprocess.Popen(SLEEP)  # nosec B603
    worker = Worker(("Fn",), connection, process.pid, b"")
    worker.kill()
    assert process.wait(timeout=10) == -signal.SIGKILL
    worker.kill()  # discard and close both kill it: the second neither signals nor closes a handle again
    assert connection.fileno() == -1


@pytest.mark.parametrize("nice", [0, 10])
def test_a_niced_zygote_is_scheduled_in_a_session_of_its_own(nice: int, tmp_path: Path) -> None:
    """With autogroup, nice weighs only within a session: ``serve``'s niced workers, left in the session that
    started them, got a ninth of any test process's share beside another suite and timed out their first jobs."""
    with open(tmp_path / "workers.log", "w") as log:
        workers = WorkerPool(log, env={"PATH": os.environ.get("PATH", "")}, nice=nice)
        try:
            zygote = workers._zygote.pid
            assert (os.getsid(zygote) == zygote) is (nice > 0)
            assert workers._zygote_ready.wait(60)  # it has niced itself by then
            assert os.getpriority(os.PRIO_PROCESS, zygote) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice)
        finally:
            workers.close()
