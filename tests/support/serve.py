"""``chuixiang serve`` as a test fixture: started in its own process, driven over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

import httpx

from chuixiang.timeouts import PROGRESS_INTERVAL
from chuixiang_local.cloud.local_cloud import environment_before_activation
from chuixiang_local.loopback import loopback_client
from chuixiang_local.workers.zygote_root import ROOT_VARIABLE, ForkedZygote

from .command_root import fork_or_say
from .waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


#: Ports a test picks for a server it starts later: below Linux's ephemeral range (32768-60999), so no
#: connection's source port and no server bound to port 0 can take one in between, and one block per
#: pytest-xdist worker, so two workers never pick the same one. A pytest without workers (``make test``'s waiting
#: lane, beside the workers) has the last block.
PORT_BLOCK = 1000
FIRST_PORT = 12000
BLOCKS = 20
#: Where in its block this process starts: another test suite on the same machine has workers of the same names,
#: hence the same blocks, and a port free when picked is taken only when the server binds it.
_next_port = os.getpid() % PORT_BLOCK


def free_port() -> int:
    """A port nobody listens on now, and no other test process will pick."""
    global _next_port
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    block = int(worker.removeprefix("gw")) if worker else BLOCKS - 1
    if worker and block >= BLOCKS - 1:
        raise RuntimeError(f"{BLOCKS - 1} pytest-xdist workers at most (ports {FIRST_PORT}-32767)")
    base = FIRST_PORT + PORT_BLOCK * block
    for _ in range(PORT_BLOCK):
        port = base + _next_port
        _next_port = (_next_port + 1) % PORT_BLOCK
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # still in use (a server a test started), or in TIME_WAIT without SO_REUSEADDR
            return port
    raise RuntimeError(f"no free port in {base}-{base + PORT_BLOCK - 1}")


#: The tests' stacks write progress at the scaled ladder's interval unless a test sets another: every ``pollAfterMs``
#: the API answers, and the time serve keeps answering polls after a drain, are in proportion to it (a client
#: following the API waits an eighth of the template default's waits).
QUICK_POLLS = {"ProgressIntervalMs": str(PROGRESS_INTERVAL.scaled)}


def one_client(timeout_s: float = 30) -> httpx.Client:
    """An HTTP client for many requests, each on a connection of its own as ``httpx.get`` opens one: a
    module-level ``httpx.get`` builds a client, and its TLS context, per request (~20 ms of CPU; a job polled
    every 0.1 s spent more on that than serve spent answering)."""
    return loopback_client(timeout=timeout_s, limits=httpx.Limits(max_keepalive_connections=0))


def written(file: IO[bytes]) -> bytes:
    """What a process writing to ``file`` wrote so far. Read where it is (``pread``), never by moving the offset
    the writer shares (its descriptor is a copy of ours): a ``seek(0)`` just before it writes would have its line
    written over the start of the file."""
    fd = file.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0)


class Serve:
    """``chuixiang serve`` in its own process, as a user starts it; ready when it answers."""

    def __init__(
        self,
        overrides: dict[str, str],
        model_base_url: str | None = None,
        fake_pace_ms: float | None = None,
        serve_args: list[str] | None = None,
        own_process_group: bool = False,
        zygote_root: bool = True,
    ) -> None:
        """``own_process_group``: as a terminal starts it, so Ctrl-C (SIGINT to the group) can be sent;
        ``zygote_root`` False: serve is started as a developer starts it (a fresh interpreter, ``python -m``) and
        starts its worker zygotes itself, so every process it runs is its descendant; by default serve is forked by
        the tests' command root and its zygotes by their zygote root (``tests/pipeline/conftest.py``)."""
        self._forked = zygote_root and not own_process_group
        env = environment_before_activation()  # as from the shell, even beside a test's in-process cloud
        self._env = {k: v for k, v in env.items() if zygote_root or k != ROOT_VARIABLE}
        self.http = one_client()
        model = ["--model-base-url", model_base_url] if model_base_url else []
        if fake_pace_ms is not None:
            model += ["--fake-pace-ms", str(fake_pace_ms)]
        params = ["--parameter-overrides", *[f"{k}={v}" for k, v in {**QUICK_POLLS, **overrides}.items()]]
        for attempt in range(3):
            try:
                self._start([*model, *params, *(serve_args or [])], own_process_group)
                return
            except AssertionError:
                # Another process bound the port between its pick and serve's bind (serve says so and exits):
                # another port. Anything else is the test's failure.
                if attempt == 2 or "cannot listen on" not in self.output():
                    raise

    def _start(self, args: list[str], own_process_group: bool) -> None:
        port = free_port()
        # A file, not a pipe: a chatty server never blocks on it; it lives as long as the server.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        argv = ["serve", "--port", str(port), *args]
        self.proc: subprocess.Popen[bytes] | ForkedZygote = (self._forked and self._fork(argv)) or subprocess.Popen(
            [sys.executable, "-m", "chuixiang_local.commands.cli", *argv],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            start_new_session=own_process_group,
            env=self._env,
        )
        self.base = f"http://127.0.0.1:{port}"
        wait_until(self._answers, timeout_s=60, what="serve answered", interval_s=0.2)

    def _fork(self, argv: list[str]) -> ForkedZygote | None:
        """Serve forked by the tests' command root, if one was started here and will give a fresh one."""
        with open(os.devnull, "rb") as stdin, open(os.devnull, "wb") as stdout:
            return fork_or_say(argv, self._env, [stdin.fileno(), stdout.fileno(), self._stderr.fileno()], ROOT)

    def _answers(self) -> bool:
        """Ours answers: serve said it listens on this port (it binds the port itself, so another server that
        took the port first makes it exit, never pass for it), and a request gets an answer."""
        if self.proc.poll() is not None:
            raise AssertionError(f"serve exited {self.proc.returncode}: {self.output()}")
        if f"API on {self.base}" not in self.output():
            return False
        try:
            self.http.get(f"{self.base}/recipes/none", timeout=1)
            return True
        except httpx.TransportError:
            return False

    def post(self, dish: str) -> str:
        created = self.http.post(f"{self.base}/recipes", json={"dish": dish})
        assert created.status_code == 202, created.text
        return str(created.json()["jobId"])

    def get(self, job_id: str) -> dict[str, Any]:
        doc: dict[str, Any] = self.http.get(f"{self.base}/recipes/{job_id}").json()
        return doc

    def wait(self, job_id: str, give_up_s: float = 60) -> dict[str, Any]:
        """Poll until the job is terminal; its last document."""
        last: list[dict[str, Any]] = []

        def ended() -> bool:
            last[:] = [self.get(job_id)]
            return last[0]["status"] in ("SUCCEEDED", "FAILED")

        wait_until(ended, timeout_s=give_up_s, what=f"job {job_id} ended", interval_s=0.1)
        return last[0]

    def cook(self, dish: str) -> dict[str, Any]:
        return self.wait(self.post(dish))

    def __enter__(self) -> Serve:
        return self

    def __exit__(self, *exc: object) -> None:
        """Whatever the test did to it, leave no server behind: stopped as a user stops it, so it
        cleans up after itself; killed (its children follow it out) only if it will not stop."""
        self.http.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def output(self) -> str:
        """What serve printed on stderr so far."""
        return written(self._stderr).decode(errors="replace")

    def stop(self) -> None:
        self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            tail = self.output()[-3000:]
            self.proc.kill()
            raise AssertionError(f"serve did not stop within 15 s of SIGTERM; its stderr ends:\n{tail}") from None
