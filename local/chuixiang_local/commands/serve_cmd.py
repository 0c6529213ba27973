"""``chuixiang serve``: the API on loopback, in a process of its own, over the local cloud; drains on a stop."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess  # nosec B404  # starts our own API process with fixed arguments
import sys
import threading
import time
from typing import Any, TextIO

from stack_template import Template, parse_overrides

from chuixiang.polling import longest_poll_ms
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.commands.common import WORK_DIR, account_quota, common, local_stack, progress
from chuixiang_local.gateway.api_server import LOCAL_IMAGES_PATH, function_argument
from chuixiang_local.gateway.demo_site import DemoSite, demo_origin


def _with_demo_origin(args: argparse.Namespace) -> None:
    """``--demo-port``: the page's origin must be allowed by CORS; add it to ``CorsAllowOrigins`` if it is not."""
    if not args.demo_port:
        return
    origin = demo_origin(args.host, args.demo_port)
    overrides = parse_overrides(args.parameter_overrides)
    listed = [
        o for o in (overrides.get("CorsAllowOrigins") or Template({}).parameters["CorsAllowOrigins"]).split(",") if o
    ]
    if origin not in listed:
        overrides["CorsAllowOrigins"] = ",".join([*listed, origin])
        progress(f"CorsAllowOrigins += {origin} (the demo page's origin)")
    args.parameter_overrides = [f"{k}={v}" for k, v in overrides.items()]


def cmd_serve(args: argparse.Namespace) -> int:
    """The local cloud here; the API in its own process (see :mod:`chuixiang_local.gateway.api_server`)."""
    _with_demo_origin(args)
    with contextlib.ExitStack() as stack:
        log = sys.stderr if args.verbose else stack.enter_context(_log_file("serve"))
        return _serve(args, stack.enter_context(local_stack(args, log)))


def _log_file(command: str) -> TextIO:
    """The functions' log of one local run (their EMF too: ``chuixiang dashboard`` reads it)."""
    path = WORK_DIR / "logs" / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Append mode (O_APPEND): serve's api process writes the api function's output to this file too, and a handle
    # that kept its own offset would write over what the other appended.
    return open(path, "a", encoding="utf-8")  # closed by the caller's ExitStack


def _file_name(log: Any) -> str | None:
    """The path of the functions' log, when it is a file (``--verbose``: stderr, which the api inherits)."""
    name = getattr(log, "name", None)
    return name if isinstance(name, str) and not name.startswith("<") else None


def _serve(args: argparse.Namespace, cloud: LocalCloud) -> int:
    spec = cloud.template.function_by_dir("api")
    host = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host  # nosec B104  # a URL, not a bind
    cloud.api_url = f"http://{host}:{args.port}"
    extra_env = {**cloud.api_environment(), "LOCAL_IMAGE_BASE_URL": f"http://{host}:{args.port}{LOCAL_IMAGES_PATH}"}
    env = {**os.environ, **extra_env, "PYTHONPATH": os.pathsep.join(map(str, cloud.layer_dirs()))}
    # serve binds the API's port itself and hands the socket to the API process: a port already taken fails here,
    # at once and by name, and nothing else listening there can pass for our API while it starts.
    try:
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        listener = socket.create_server((args.host, args.port), family=family, backlog=2048)
    except OSError as exc:
        progress(f"error: cannot listen on {args.host}:{args.port} ({exc.strerror}); choose another --port")
        return 1
    api = subprocess.Popen(  # nosec B603  # sys.executable and our own module
        [
            sys.executable,
            "-m",
            "chuixiang_local.gateway.api_server",
            "--fd",
            str(listener.fileno()),
            "--workers",
            str(args.workers),
            "--body-idle-seconds",
            str(args.body_idle_seconds),
            "--body-total-seconds",
            str(args.body_total_seconds),
            "--function",
            function_argument(spec, cloud.layer_dirs(), extra_env),
            "--jwt-issuer",
            cloud.template.parameters["JwtIssuer"],
            "--jwt-audience",
            cloud.template.parameters["JwtAudience"],
            *(["--requests-fd", str(cloud.api_requests.fd)] if cloud.api_requests else []),
            *(["--log-file", log_name] if (log_name := _file_name(cloud.log)) else []),
        ],
        # stdin: it exits with this process (see exit_with_parent); a session of its own: Ctrl-C is
        # this process's to handle (a drain first), not a signal that stops the API mid-drain.
        env=env,
        stdin=subprocess.PIPE,
        start_new_session=True,
        pass_fds=(listener.fileno(), *([cloud.api_requests.fd] if cloud.api_requests else [])),
    )
    listener.close()  # the API process holds it now
    draining = threading.Event()

    def stop(*_: Any) -> None:
        if not draining.is_set():  # the first signal: drain
            draining.set()
            api.send_signal(signal.SIGUSR1)
            return
        progress("stopping: the API process")  # the second: at once
        _exit_if_still_stopping_after(SERVE_STOP_LIMIT_S)
        api.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if not _accepts(args.host, args.port, api):
        progress(f"the API process ended before it listened on {args.host}:{args.port} (exit {api.returncode})")
        return 1
    progress(
        f"API on http://{args.host}:{args.port}  (POST /recipes, GET /recipes/{{jobId}}, "
        f"/openapi.json, Swagger UI at /swagger); the local cloud (moto) at {cloud.endpoint}; Ctrl-C stops "
        f"(jobs in flight get {args.drain_seconds:g} s to finish; twice: at once)"
    )
    demo = DemoSite(args.host, args.demo_port, f"http://{host}:{args.port}") if args.demo_port else None
    if demo:
        demo.start()
        progress(f"demo page on {demo.origin}/ (calls the API cross-origin)")
    _wait_interruptibly(api, until=draining)
    if demo:
        demo.stop()
    died = not draining.is_set() and api.poll() is not None
    if died:  # nobody asked it to stop: say so, and exit with an error (a supervisor restarts serve)
        progress(died_message(api.returncode, cloud.api_requests.value() if cloud.api_requests else None))
    if draining.is_set() and api.poll() is None:
        _drain(cloud, api, args.drain_seconds)
        if api.poll() is None:
            stop()
            _wait_interruptibly(api)
    for first in (cloud.front_door, cloud.call_priority):
        if first is not None:
            progress(first.summary())
    progress("stopping: the local cloud and the model")
    progress("stopped")
    return 1 if died else 0


def died_message(code: int, open_requests: int | None) -> str:
    """What serve says when its API process died unasked: how, and the requests it cut (its count of requests
    open, left as they were when it died: each got no answer, and its client a dropped connection)."""
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    cut = "" if open_requests is None else f"; {open_requests} request(s) in flight got no answer"
    return f"error: the API process died ({how}){cut}; stopping the local cloud"


def _drain(cloud: LocalCloud, api: subprocess.Popen[bytes], bound_s: float) -> None:
    """Let the executions running now finish, for at most ``bound_s`` (or until a second signal stops the
    API), then say how many finished and how many were cut."""
    running = set(cloud.running_executions())
    progress(
        f"draining: no new jobs (503 + Retry-After), polls answered; {len(running)} job(s) in flight, "
        f"up to {bound_s:g} s"
    )
    end = time.monotonic() + bound_s
    left = running
    while left and time.monotonic() < end and api.poll() is None:
        time.sleep(0.2)
        left = running & set(cloud.running_executions())
    if api.poll() is not None:  # stopped at once by a second signal
        return
    progress(f"drained: {len(running) - len(left)} finished, {len(left)} cut")
    if len(running) > len(left):
        # A job that ended is not done until its client has read the end: keep answering polls for one poll
        # interval at the slowest pace the API asks for (a client polling as told reads it within that).
        grace_s = read_grace_s(int(cloud.template.parameters["ProgressIntervalMs"]))
        progress(f"answering polls {grace_s:g} s more, so the last jobs' ends are read")
        until = time.monotonic() + grace_s
        while time.monotonic() < until and api.poll() is None:
            time.sleep(0.1)


def _accepts(host: str, port: int, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> bool:
    """Whether the API's port accepts connections (within ``timeout_s``, while ``proc`` runs): "API on …" is
    printed only once it is true, so whoever reads it can connect at once."""
    until = time.monotonic() + timeout_s
    while time.monotonic() < until and proc.poll() is None:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _wait_interruptibly(proc: subprocess.Popen[bytes], until: threading.Event | None = None) -> None:
    """Wait for ``proc`` (or ``until``) in short waits. The kernel may hand SIGTERM to any of this process's threads;
    Python then only runs the handler once the main thread is back in the interpreter, which a
    plain ``wait()`` (one blocking ``waitpid``) never is while the child lives: ``serve`` ignored
    SIGTERM about two times in three with sixty executions running."""
    while until is None or not until.is_set():
        try:
            proc.wait(timeout=0.2)
            return
        except subprocess.TimeoutExpired:
            continue


def read_grace_s(progress_interval_ms: int) -> float:
    """After a drain, how long polls are still answered: the longest ``pollAfterMs`` the API hands out (in
    proportion to the stack's progress interval), and a margin for the poll itself."""
    return longest_poll_ms(progress_interval_ms) / 1000 + 1.5


#: How long ``serve`` may take to stop once asked (it takes well under a second).
SERVE_STOP_LIMIT_S = 10.0


def _exit_if_still_stopping_after(seconds: float) -> None:
    """A stop must end: should a step hang (a child that ignores SIGTERM, a server that never wakes),
    exit anyway after ``seconds``, saying so; the last "stopping:" line on stderr names the step."""

    def bail() -> None:
        time.sleep(seconds)
        progress(f"still stopping after {seconds:g} s; exiting now")
        os._exit(1)

    threading.Thread(target=bail, name="stop-limit", daemon=True).start()


def add_parser(sub: Any) -> None:
    """The command's arguments, under ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser("serve", help="serve the API on loopback")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=3000)
    p.add_argument("--verbose", action="store_true", help="function logs on stderr")
    p.add_argument("--workers", type=int, default=16, help="api invocations at once (warm api function processes)")
    p.add_argument(
        "--demo-port", type=int, default=0, help="also serve the demo page (clients/demo) on this port (0: no page)"
    )
    p.add_argument(
        "--body-idle-seconds",
        type=float,
        default=10,
        help="a request whose headers or body stall this long is answered 408 (it never holds the functions)",
    )
    p.add_argument(
        "--body-total-seconds",
        type=float,
        default=30,
        help="a request whose body takes longer in all is answered 408 (HTTP API's integration timeout)",
    )
    p.add_argument(
        "--drain-seconds",
        type=float,
        default=30,
        help="on SIGTERM or Ctrl-C, how long the jobs in flight may take to finish (a second signal: stop at once)",
    )
    p.add_argument(
        "--no-front-door-first",
        dest="front_door_first",
        action="store_false",
        help="do not hold the state machine's invocations while API calls are in flight, nor "
        "serve the api function's AWS calls first in moto (on by default: on AWS the API "
        "never shares a CPU or a DynamoDB server with the functions)",
    )
    account_quota(p)
    common(p)
    p.set_defaults(func=cmd_serve)
