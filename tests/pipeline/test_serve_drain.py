"""``serve`` stops like a release should: on SIGTERM or Ctrl-C it stops admitting jobs (503 with
``Retry-After``, polls still answered), lets the jobs in flight finish up to ``--drain-seconds``, then
stops, saying how many finished and how many were cut. A second signal stops it at once."""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from chuixiang_local.loopback import loopback_client

from ..support.commands import start_cli
from ..support.serve import ROOT, Serve, free_port
from ..support.waiting import wait_until

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)


def _drained(serve: Serve) -> tuple[int, int]:
    found = re.search(r"drained: (\d+) finished, (\d+) cut", serve.output())
    assert found, serve.output()[-2000:]
    return int(found[1]), int(found[2])


def test_sigterm_refuses_new_jobs_answers_polls_and_lets_the_running_ones_finish() -> None:
    with Serve({}, fake_pace_ms=2, serve_args=["--drain-seconds", "60"]) as serve:
        jobs = [serve.post("排队菜一号"), serve.post("排队菜二号")]
        serve.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "draining" in serve.output(), timeout_s=10, what="serve started draining")
        refused = serve.http.post(f"{serve.base}/recipes", json={"dish": "来晚的菜"}, timeout=10)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "SERVICE_UNAVAILABLE" and int(refused.headers["retry-after"]) > 0
        polled = serve.http.get(f"{serve.base}/recipes/{jobs[0]}", timeout=10)  # a client still sees its job
        assert polled.status_code == 200 and polled.json()["jobId"] == jobs[0]
        assert serve.proc.wait(timeout=90) == 0
        assert _drained(serve) == (2, 0)


def test_a_client_polling_as_told_reads_its_jobs_end_after_the_drain() -> None:
    """The last executions ending is not the end of the drain: their clients poll at the pace the API asks
    (pollAfterMs) and must read SUCCEEDED, not a refused connection."""
    with Serve({}, fake_pace_ms=20, serve_args=["--drain-seconds", "60"]) as serve:
        job = serve.post("最后一道菜")
        serve.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "draining" in serve.output(), timeout_s=10, what="serve started draining")
        seen: list[str] = []
        while True:
            doc = serve.http.get(f"{serve.base}/recipes/{job}", timeout=10).json()  # a refused connection raises
            seen.append(doc["status"])
            if doc["pollAfterMs"] is None:
                break
            time.sleep(doc["pollAfterMs"] / 1000)
        assert seen[-1] == "SUCCEEDED", seen
        assert serve.proc.wait(timeout=30) == 0
        assert _drained(serve) == (1, 0) and "so the last jobs' ends are read" in serve.output()


def test_the_drain_is_bounded_and_says_what_it_cut() -> None:
    with Serve({}, fake_pace_ms=200, serve_args=["--drain-seconds", "1"]) as serve:
        serve.post("慢慢写的菜")
        serve.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert serve.proc.wait(timeout=30) == 0
        assert time.monotonic() - started < 1 + 10  # the bound, then the usual stop
        assert _drained(serve) == (0, 1)


def test_a_second_signal_stops_at_once() -> None:
    with Serve({}, fake_pace_ms=200, serve_args=["--drain-seconds", "60"]) as serve:
        serve.post("等不及的菜")
        serve.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: "draining" in serve.output(), timeout_s=10, what="serve started draining")
        started = time.monotonic()
        serve.proc.send_signal(signal.SIGTERM)
        assert serve.proc.wait(timeout=30) == 0
        assert time.monotonic() - started < 15  # not the 60 s drain
        assert "drained" not in serve.output()


#: The body idle limit of the serve the two tests of stalled clients share.
IDLE_S = 3


@pytest.fixture(scope="module")
def idle_limited() -> Iterator[Serve]:
    """One serve for both tests of stalled clients (a serve's start is ~3.5 s of CPU)."""
    with Serve({}, serve_args=["--body-idle-seconds", str(IDLE_S)]) as serve:
        yield serve


def test_a_client_stalled_mid_body_gets_a_json_408_and_holds_nothing_meanwhile(idle_limited: Serve) -> None:
    """A body that stops arriving is cut at --body-idle-seconds with the one error shape; while it hangs,
    a whole job runs as fast as without it (the stalled request is not an open request for the front door)."""
    serve = idle_limited
    alone_started = time.monotonic()
    assert serve.cook("先来的菜")["status"] == "SUCCEEDED"
    alone_s = time.monotonic() - alone_started
    host, port = serve.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as stalled:
        stalled.sendall(
            b'POST /recipes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"di'
        )
        sent = time.monotonic()
        started = time.monotonic()
        assert serve.cook("并行的菜")["status"] == "SUCCEEDED"
        assert time.monotonic() - started < alone_s + 3, "the stalled body held the functions"
        answer = _read_answer(stalled)
        waited = time.monotonic() - sent
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split()[1] == b"408", answer
    assert json.loads(body)["error"]["code"] == "BAD_REQUEST"
    # Not before the limit: the server's idle clock starts when it reads the bytes, which may be a moment before
    # `sent` is taken after `sendall` (as in the slowloris test below).
    assert IDLE_S - 0.1 <= waited < IDLE_S + 3


def test_slowloris_connections_get_a_json_408_at_the_header_limit(idle_limited: Serve) -> None:
    """Eighty connections that send their headers a byte at a time: each is answered 408 in the one error
    shape and closed at --body-idle-seconds (before, they stayed open for more than a minute), and a job runs
    meanwhile. Each answer is timed when it arrives (read as it comes, beside the job), from its own send."""
    serve = idle_limited
    host, port = serve.base.removeprefix("http://").split(":")
    slow = [socket.create_connection((host, int(port)), timeout=30) for _ in range(80)]
    try:
        sent = {}
        for conn in slow:
            conn.sendall(b"POST /recipes HTTP/1.1\r\nHost: x\r\nX-Slow: a")  # never the blank line
            sent[conn] = time.monotonic()
        with ThreadPoolExecutor(max_workers=1) as pool:
            reader = pool.submit(_read_until_closed, slow)
            assert serve.cook("慢连接旁边的菜")["status"] == "SUCCEEDED"
            answers, closed_at = reader.result(timeout=60)
    finally:
        for conn in slow:
            conn.close()
    assert all(
        a.split()[1] == b"408" and json.loads(a.partition(b"\r\n\r\n")[2])["error"]["code"] == "BAD_REQUEST"
        for a in answers.values()
    ), next(iter(answers.values()))
    waited = [closed_at[conn] - sent[conn] for conn in slow]
    # Not before the limit (the server's idle clock starts when it reads the bytes, at most a moment before
    # `sent` is taken after `sendall`), and none kept open long past it.
    assert min(waited) > IDLE_S - 0.1 and max(waited) < IDLE_S + 5, (min(waited), max(waited))


def _read_until_closed(conns: list[socket.socket]) -> tuple[dict[socket.socket, bytes], dict[socket.socket, float]]:
    """Each connection's whole answer, and when the server closed it (read as the bytes come)."""
    answers: dict[socket.socket, bytes] = dict.fromkeys(conns, b"")
    closed_at: dict[socket.socket, float] = {}
    with selectors.DefaultSelector() as selector:
        for conn in conns:
            selector.register(conn, selectors.EVENT_READ)
        while len(closed_at) < len(conns):
            for key, _ in selector.select(timeout=30):
                assert isinstance(key.fileobj, socket.socket)
                conn = key.fileobj
                chunk = conn.recv(65536)
                if chunk:
                    answers[conn] += chunk
                else:
                    closed_at[conn] = time.monotonic()
                    selector.unregister(conn)
    return answers, closed_at


def _raw(serve: Serve, request: bytes, drip_s: float = 0.0) -> tuple[bytes, float]:
    """Send ``request`` (a byte every ``drip_s``: a client dripping its body), read the whole answer."""
    host, port = serve.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        started = time.monotonic()
        if drip_s:
            head, _, body = request.partition(b"\r\n\r\n")
            conn.sendall(head + b"\r\n\r\n")
            for byte in body:
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    break  # answered and closed mid-drip
                time.sleep(drip_s)
        else:
            conn.sendall(request)
        return _read_answer(conn), time.monotonic() - started


def _read_answer(conn: socket.socket) -> bytes:
    """An HTTP answer read off a raw socket: its head and its JSON body (or all there is, if it closes)."""
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        answer += chunk
    return answer


def test_hostile_requests_at_the_front_door() -> None:
    """A body dripped a byte just inside the idle limit is cut at --body-total-seconds; an event over
    Lambda's 6 MB is refused before the function runs (as AWS does); a rotating X-Forwarded-For is not a new
    caller (serve takes the TCP peer, as HTTP API's sourceIp is)."""
    with Serve(
        {"RecipeConcurrencyPerCaller": "1"}, serve_args=["--body-idle-seconds", "1", "--body-total-seconds", "2"]
    ) as serve:
        drip = b"POST /recipes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"
        answer, took = _raw(serve, drip + b'{"dish": "' + b"a" * 30, drip_s=0.4)
        assert answer.split()[1] == b"408" and b"took over 2 s" in answer, answer
        assert 2 <= took < 2 + 2
        big = b'{"dish": "' + b"a" * (6 * 1024 * 1024) + b'"}'
        answer, _ = _raw(
            serve,
            b"POST /recipes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(big)}\r\n\r\n".encode()
            + big,
        )
        assert answer.split()[1] == b"413" and json.loads(answer.partition(b"\r\n\r\n")[2]) == {
            "message": "Request Entity Too Large"
        }
        with loopback_client(base_url=serve.base, timeout=30) as client:
            first = client.post("/recipes", json={"dish": "第一道菜"}, headers={"X-Forwarded-For": "203.0.113.1"})
            second = client.post("/recipes", json={"dish": "第二道菜"}, headers={"X-Forwarded-For": "203.0.113.2"})
        assert first.status_code == 202, first.text
        assert second.status_code == 429 and second.json()["error"]["code"] == "TOO_MANY_JOBS", second.text


def test_api_on_is_printed_once_the_port_accepts() -> None:
    """Whoever reads "API on …" can connect at once (it was printed ~1.4 s before the port accepted)."""
    port = free_port()
    read_end, write_end = os.pipe()
    proc = start_cli("serve", "--port", str(port), stderr=write_end)
    os.close(write_end)  # serve holds it now: the pipe ends when serve does
    try:
        for line in os.fdopen(read_end, "rb"):
            if b"API on http://" in line:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break  # one try, no wait: it accepts
        else:
            raise AssertionError("serve never said where the API is")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def test_the_api_functions_metrics_go_to_the_functions_log() -> None:
    """Under serve the api function runs in the API's own process: its EMF (admission, 429s) is written to the
    functions' log beside the other functions', as a Lambda's stdout goes to its log group, so the dashboard's
    API and admission rows have data (they were empty: it went to serve's stderr)."""
    from chuixiang_local.commands.dashboard import read_points

    started = time.time()
    with Serve({"RecipeConcurrency": "1", "RecipeConcurrencyPerCaller": "0", "RecipeSections": "whole"}) as serve:
        first = serve.http.post(f"{serve.base}/recipes", json={"dish": "占位的菜"}, timeout=30)
        second = serve.http.post(f"{serve.base}/recipes", json={"dish": "被拒的菜"}, timeout=30)
        assert (first.status_code, second.status_code) == (202, 429)
        serve.wait(first.json()["jobId"])
    logs = [p for p in (ROOT / ".chuixiang" / "logs").glob("serve-*.log") if p.stat().st_mtime >= started]
    names = {p.name for p in read_points(logs)}
    assert {"JobsRejected", "AdmissionSlotsInUse"} <= names, sorted(names)


def test_an_api_process_killed_under_load_is_said_with_the_requests_it_cut() -> None:
    """``kill -9`` of serve's API process while clients poll: serve exits 1 and says how the API died and how
    many requests it cut (its count of requests open, as the process left it)."""
    with Serve({}, fake_pace_ms=2) as serve:
        job = serve.post("被打断的菜")
        children = Path(f"/proc/{serve.proc.pid}/task/{serve.proc.pid}/children").read_text().split()
        api = next(int(pid) for pid in children if "api_server" in Path(f"/proc/{pid}/cmdline").read_text())
        with ThreadPoolExecutor(8) as pool:
            polls = [pool.submit(serve.http.get, f"{serve.base}/recipes/{job}", timeout=10) for _ in range(40)]
            os.kill(api, signal.SIGKILL)
            for poll in polls:
                with contextlib.suppress(httpx.HTTPError):
                    poll.result()
        assert serve.proc.wait(timeout=30) == 1
        said = re.search(
            r"the API process died \(killed by signal 9\); (\d+) request\(s\) in flight got no answer", serve.output()
        )
        assert said, serve.output()[-1500:]
