"""Parent side of local Lambda invocations: warm worker processes, init outside the Timeout.

Like a Lambda sandbox, a worker is a process of its own with the function's
environment; it is created on demand (forked from :mod:`chuixiang_local.workers.zygote`,
which holds the heavy imports), runs its *init* - importing the handler - within
:data:`INIT_LIMIT_S` (Lambda's init phase limit) and not against the function's
Timeout, then serves invocations one at a time and is reused warm. At ``Timeout``
the worker is killed and the caller sees ``Sandbox.Timedout``, as Step Functions
does in AWS; a killed or crashed worker is never reused.
"""

from __future__ import annotations

import compileall
import contextlib
import json
import os
import queue
import select
import shutil
import signal
import socket
import subprocess  # nosec B404  # starts the worker zygote with fixed arguments
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from stack_template import FunctionSpec

from chuixiang_local.workers.zygote_root import ForkedZygote, RootRefused, fork_zygote

#: Environment a Lambda process inherits from the runner (nothing else leaks in).
PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "PYENV_VERSION", "MODEL_API_KEY")
#: Lambda's limit on a function's init phase.
INIT_LIMIT_S = 10.0
#: How long a cold start waits for the zygote to load its modules (this emulator's start, not a function's init:
#: on a busy machine a fresh zygote took seconds, and the first jobs of a ``serve`` failed Runtime.InitTimeout).
ZYGOTE_START_LIMIT_S = 120.0
#: Idle warm workers kept per function (more are created under load, then killed when returned).
MAX_IDLE_PER_FUNCTION = 16


@dataclass
class Invocation:
    payload: Any
    error_type: str | None
    duration_ms: int
    init_ms: int | None = None  #: the cold start's init, when this invocation had one (not in duration)
    #: The worker's peak resident memory so far, as Lambda's "Max Memory Used" (the process's, imports included)
    max_memory_mb: int | None = None

    @property
    def failed(self) -> bool:
        return self.error_type is not None


class WorkerGone(Exception):
    """The worker's connection closed: it crashed, exited or was killed."""


def process_handle(pid: int) -> int | None:
    """A handle on the process ``pid`` names now (Linux's pidfd), taken just after its hello; None where there is none.

    Workers are reaped as they exit (their zygote ignores SIGCHLD), so a dead worker's pid is free, and with
    ``pid_max`` at 32,768 a ``make test`` (~3,000 processes a minute) hands it to another process within minutes:
    a kill by that number would end another test's worker (``Runtime.ExitError``, no traceback). A pidfd names
    the process, not the number: a signal through it to a process gone fails instead."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or the worker already gone
        return os.pidfd_open(pid)
    return None


class Worker:
    def __init__(self, key: tuple[Any, ...], conn: socket.socket, pid: int, buffer: bytes) -> None:
        self.key, self.conn, self.pid, self._buffer = key, conn, pid, buffer
        self._handle = process_handle(pid)
        self._killing = threading.Lock()  # discard and close may kill one worker at once: its handle closes once
        self._killed = False

    def send(self, message: dict[str, Any]) -> None:
        self.conn.sendall(json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n")

    def recv(self, timeout_s: float) -> dict[str, Any] | None:
        """The next message, or None when ``timeout_s`` passes first."""
        end = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = end - time.monotonic()
            if left <= 0:
                return None
            self.conn.settimeout(left)
            try:
                chunk = self.conn.recv(65536)
            except TimeoutError:
                return None
            except OSError as exc:
                raise WorkerGone(str(exc)) from exc
            if not chunk:
                raise WorkerGone("connection closed")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def alive(self) -> bool:
        """An idle worker says nothing until it is sent an event: a readable connection (its EOF, or anything
        unasked for) means it died or broke while idle, and must not be handed a request."""
        if self._buffer:
            return False
        readable, _, _ = select.select([self.conn], [], [], 0)
        return not readable

    def kill(self) -> None:
        """SIGKILL this worker (through its pidfd where there is one: never a process that took its pid)."""
        with self._killing:
            if self._killed:
                return  # its pid may be another process's by now
            self._killed = True
            try:
                if self._handle is not None:
                    signal.pidfd_send_signal(self._handle, signal.SIGKILL)
                else:
                    os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it had exited
            finally:
                if self._handle is not None:
                    os.close(self._handle)
                self.conn.close()


class WorkerPool:
    """Warm workers per (function, environment), forked from one zygote; safe to use from many threads."""

    def __init__(
        self,
        log: TextIO | None = None,
        *,
        env: dict[str, str] | None = None,
        code_dirs: list[Path] | None = None,
        nice: int = 0,
        max_idle: int = MAX_IDLE_PER_FUNCTION,
    ) -> None:
        """``env``: what every function's environment shares (the zygote imports the layer with it);
        ``code_dirs``: the layer and function code, compiled to ``.pyc`` once here, not by each worker;
        ``nice``: the workers' scheduling niceness (see ``LocalCloud``); ``max_idle``: warm workers kept
        per function.

        A niced zygote starts a session of its own. Linux schedules each session as one group (autogroup), and
        nice orders processes only within theirs: in the starting session a nice of 10 weighs a ninth of any
        other process there, so with two test suites on two cores a ``serve``'s zygote took ~40 s to load its
        modules and its first jobs' Submit state timed out. In a group of their own the workers get a group's
        share; the API process, in a session of its own too, still answers first (its group against theirs)."""
        self._dir = tempfile.mkdtemp(prefix="cx-workers-")
        self.socket_path = os.path.join(self._dir, "w.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.socket_path)
        self._listener.listen(512)
        dirs = [str(d) for d in code_dirs or []]
        for d in dirs:
            compileall.compile_dir(d, quiet=1)
        self._zygote_env = {
            **(env if env is not None else os.environ),
            "CHUIXIANG_PRELOAD_PATH": os.pathsep.join(dirs),
            "CHUIXIANG_WORKER_NICE": str(nice),
            "CHUIXIANG_WORKER_DIR": self._dir,
        }
        self._log = log
        self._nice = nice
        self.max_idle = max_idle
        self.zygotes_started = 0
        self._lock = threading.Lock()
        self._idle: dict[tuple[Any, ...], list[Worker]] = {}
        self._all: dict[int, Worker] = {}  # by id(): a pid can come back, a Worker object cannot
        self._pending: dict[str, queue.Queue[tuple[socket.socket, int, bytes]]] = {}
        self._closed = False
        self._zygote_ready = threading.Event()
        self._zygote = self._start_zygote()
        threading.Thread(target=self._accept, name="worker-accept", daemon=True).start()

    def busy(self, function: str | None = None) -> list[Worker]:
        """The workers running an invocation now (of ``function``, a logical id, or of any function)."""
        with self._lock:
            idle = {id(w) for ws in self._idle.values() for w in ws}
            return [w for w in self._all.values() if id(w) not in idle and function in (None, w.key[0])]

    def _start_zygote(self) -> subprocess.Popen[bytes] | ForkedZygote:
        """A zygote, and a thread that sets ``_zygote_ready`` once it says its modules are loaded (or it exits)."""
        self.zygotes_started += 1
        zygote_id, hello = f"zygote-{uuid.uuid4()}", queue.Queue[tuple[socket.socket, int, bytes]]()
        self._pending[zygote_id] = hello
        ready = self._zygote_ready = threading.Event()
        env = {**self._zygote_env, "CHUIXIANG_ZYGOTE_ID": zygote_id}
        zygote = self._fork_from_root(env) or subprocess.Popen(  # nosec B603  # sys.executable and our own module
            [sys.executable, "-m", "chuixiang_local.workers.zygote"],
            stdin=subprocess.PIPE,
            env=env,
            stdout=self._log or subprocess.DEVNULL,
            stderr=self._log or subprocess.DEVNULL,
            start_new_session=self._nice > 0,
        )

        def await_hello() -> None:
            try:
                while zygote.poll() is None:
                    with contextlib.suppress(queue.Empty):
                        hello.get(timeout=0.2)[0].close()
                        return
            finally:
                self._pending.pop(zygote_id, None)
                ready.set()

        threading.Thread(target=await_hello, name="zygote-ready", daemon=True).start()
        return zygote

    def _fork_from_root(self, env: dict[str, str]) -> ForkedZygote | None:
        """A zygote forked by the root this process was given (``zygote_root``), if any will do."""
        with contextlib.ExitStack() as closing:
            out = self._log.fileno() if self._log else closing.enter_context(open(os.devnull, "wb")).fileno()
            try:
                return fork_zygote(env, out, new_session=self._nice > 0)
            except RootRefused as refused:
                if self._log:
                    print(f"worker zygote: {refused}; starting one of our own", file=self._log, flush=True)
        return None

    def _fork(self, request: dict[str, Any]) -> None:
        """Ask the zygote for a worker; a zygote that died (killed, out of memory) is replaced first, as
        Lambda replaces a broken sandbox: one ``kill -9`` must not fail every later cold start."""
        line = json.dumps(request, ensure_ascii=False).encode() + b"\n"
        with self._lock:
            for _ in range(2):
                if self._zygote.poll() is not None:
                    if self._log:
                        print(
                            f"worker zygote {self._zygote.pid} exited ({self._zygote.returncode}); starting another",
                            file=self._log,
                            flush=True,
                        )
                    self._zygote = self._start_zygote()
                try:
                    assert self._zygote.stdin is not None  # nosec B101  # type narrowing (stdin=PIPE)
                    self._zygote.stdin.write(line)
                    self._zygote.stdin.flush()
                    return
                except (BrokenPipeError, ValueError):  # it died between the check and the write
                    self._zygote.wait()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._hello, args=(conn,), daemon=True).start()

    def _hello(self, conn: socket.socket) -> None:
        conn.settimeout(INIT_LIMIT_S)
        buffer = b""
        try:
            while b"\n" not in buffer:
                chunk = conn.recv(4096)
                if not chunk:
                    conn.close()
                    return
                buffer += chunk
        except OSError:
            conn.close()
            return
        line, rest = buffer.split(b"\n", 1)
        hello = json.loads(line)
        waiting = self._pending.get(hello["hello"])
        if waiting is None:
            conn.close()
            return
        waiting.put((conn, int(hello["pid"]), rest))

    def acquire(self, spec: FunctionSpec, env: dict[str, str], sys_path: list[str]) -> tuple[Worker, int | None]:
        """A warm worker (init None) or a new one and its init time in ms; raises ``InitFailed``."""
        # The code's directory too: after a release, a function's versions are different code (as the zygote keys them).
        key = (spec.logical_id, str(spec.code_dir), tuple(sys_path), tuple(sorted(env.items())))
        while True:
            with self._lock:
                idle = self._idle.get(key)
                candidate = idle.pop() if idle else None
            if candidate is None:
                break
            if candidate.alive():
                return candidate, None
            self.discard(candidate)  # died while idle: never handed a request, a cold start instead
        worker_id = str(uuid.uuid4())
        arrived: queue.Queue[tuple[socket.socket, int, bytes]] = queue.Queue()
        self._pending[worker_id] = arrived
        request = {
            "worker_id": worker_id,
            "socket": self.socket_path,
            "env": env,
            "cwd": str(spec.code_dir),
            "sys_path": sys_path,
            "handler": spec.handler,
        }
        # The init is timed from a loaded zygote: waiting for this emulator to start is no function's init.
        self._zygote_ready.wait(ZYGOTE_START_LIMIT_S)
        started = time.monotonic()
        try:
            self._fork(request)
            try:
                conn, pid, rest = arrived.get(timeout=INIT_LIMIT_S)
            except queue.Empty:
                raise InitFailed("Runtime.InitTimeout", f"no worker within {INIT_LIMIT_S:g} s") from None
        finally:
            self._pending.pop(worker_id, None)
        worker = Worker(key, conn, pid, rest)
        with self._lock:
            self._all[id(worker)] = worker
        try:
            ready = worker.recv(max(0.0, INIT_LIMIT_S - (time.monotonic() - started)))
        except WorkerGone:
            ready = {"init_error": {"errorType": "Runtime.ExitError", "errorMessage": "worker exited during init"}}
        if ready is None or "init_error" in ready:
            self.discard(worker)
            error = (ready or {}).get("init_error") or {
                "errorType": "Runtime.InitTimeout",
                "errorMessage": f"init over {INIT_LIMIT_S:g} s",
            }
            raise InitFailed(error["errorType"], error["errorMessage"])
        return worker, int((time.monotonic() - started) * 1000)

    def release(self, worker: Worker) -> None:
        with self._lock:
            idle = self._idle.setdefault(worker.key, [])
            if not self._closed and len(idle) < self.max_idle:
                idle.append(worker)
                return
        self.discard(worker)

    def prewarm(self, spec: FunctionSpec, env: dict[str, str], sys_path: list[str], count: int) -> None:
        """Start ``count`` workers now and keep them warm, as provisioned concurrency would."""
        with ThreadPoolExecutor(max_workers=8) as starting:
            workers = list(starting.map(lambda _: self.acquire(spec, env, sys_path)[0], range(count)))
        for worker in workers:
            self.release(worker)

    def retire_idle(self) -> int:
        """End every idle worker and every function's zygote (as Lambda recycles sandboxes): the next
        invocations start cold and run their init again, without what an earlier one kept (a secret
        Parameters cached, a client). Workers busy now finish their invocation. Returns how many ended."""
        with self._lock:
            idle = [w for workers in self._idle.values() for w in workers]
            self._idle.clear()
            if self._zygote.poll() is None and self._zygote.stdin is not None:
                self._zygote.stdin.write(b'{"retire": true}\n')  # its function zygotes end; new ones init anew
                self._zygote.stdin.flush()
        for worker in idle:
            self.discard(worker)
        return len(idle)

    def discard(self, worker: Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.pop(id(worker), None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._all.values())
            self._all.clear()
            self._idle.clear()
        for worker in workers:
            worker.kill()
        self._listener.close()
        if self._zygote.stdin:
            self._zygote.stdin.close()
        self._zygote.kill()
        self._zygote.wait()
        shutil.rmtree(self._dir, ignore_errors=True)


class InitFailed(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def runner_env() -> dict[str, str]:
    """What every function's environment has of the runner's own (:data:`PASSTHROUGH`)."""
    return {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}


def lambda_env(spec: FunctionSpec, extra_env: dict[str, str]) -> dict[str, str]:
    """The environment of the function's sandbox: the template's, the runner's, Lambda's own variables."""
    env = runner_env()
    env.update(spec.env)
    env.update(extra_env)
    env.update(
        {
            "_HANDLER": spec.handler,
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
            "AWS_LAMBDA_FUNCTION_TIMEOUT": str(spec.timeout_s),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "CHUIXIANG_FUNCTION_ARN": spec.arn,
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def invoke(
    spec: FunctionSpec, event: Any, *, pool: WorkerPool, layer_dirs: list[Path], extra_env: dict[str, str]
) -> Invocation:
    """One invocation on a warm (or new) worker; its Timeout starts once the worker is ready."""
    request_id = str(uuid.uuid4())
    try:
        worker, init_ms = pool.acquire(spec, lambda_env(spec, extra_env), [str(spec.code_dir), *map(str, layer_dirs)])
    except InitFailed as exc:
        return Invocation({"errorType": exc.error_type, "errorMessage": str(exc)}, exc.error_type, 0)
    started = time.time()
    deadline_ms = int(started * 1000) + spec.timeout_s * 1000
    try:
        worker.send({"event": event, "deadline_ms": deadline_ms, "request_id": request_id})
        out = worker.recv(max(0.0, deadline_ms / 1000 - time.time()))
    except (WorkerGone, OSError) as exc:
        pool.discard(worker)
        return Invocation(
            {"errorType": "Runtime.ExitError", "errorMessage": f"worker died: {exc}"},
            "Runtime.ExitError",
            int((time.time() - started) * 1000),
            init_ms,
        )
    duration = int((time.time() - started) * 1000)
    if out is None:
        pool.discard(worker)  # a timed-out sandbox is not reused
        return Invocation(
            {
                "errorType": "Sandbox.Timedout",
                "errorMessage": f"{request_id} Task timed out after {spec.timeout_s:.2f} seconds",
            },
            "Sandbox.Timedout",
            duration,
            init_ms,
        )
    pool.release(worker)
    memory = int(out["max_rss_kb"]) // 1024 if "max_rss_kb" in out else None
    if "error" in out:
        return Invocation(out["error"], out["error"]["errorType"], duration, init_ms, memory)
    return Invocation(out["result"], None, duration, init_ms, memory)
