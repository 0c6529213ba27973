"""Load on ``chuixiang serve``: N clients, each POSTs a dish and polls it to the end.

Starts ``chuixiang serve`` (embedded fake model, production parameters unless
overridden) in its own process, then runs ``--clients`` threads that each POST a
distinct dish (all in the same instant, or evenly over ``--ramp-s``) and poll
``GET /recipes/{jobId}`` every ``pollAfterMs`` (or ``--poll-ms``) until the job is
terminal. With ``--for-s``, each client then starts its next job at once, for that
long: a steady state of N clients mixing POSTs and GETs. Prints jobs, wall time,
POST and GET latency, time-to-terminal p50/p95, and the final statuses.

    .venv/bin/python bench/serve_load.py [--clients 60] [--ramp-s 0] [--for-s S] [--poll-ms N] [--workers 16]
                                         [--fake-pace-ms 2] [--settle-s 0] [--no-front-door-first]
                                         [--parameter-overrides K=V …]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.serve import Serve  # the same launcher the tests use


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def client(
    base: str,
    dish: str,
    poll_s: float | None,
    give_up_s: float,
    out: dict[str, Any],
    start: threading.Barrier,
    delay_s: float,
    until: float | None = None,
) -> None:
    """POST ``dish`` and poll its job to the end; with ``until`` (a ``monotonic`` time), start the next
    job (``dish`` + a count) at once, as long as that time has not come. Records every POST's and
    every GET's latency, and each job's end."""
    out.update(posts=[], gets=[], jobs=[])
    with httpx.Client(base_url=base, timeout=60) as http:
        start.wait()
        time.sleep(delay_s)
        n = 0
        while True:
            try:
                out["jobs"].append(_one_job(http, f"{dish}{n or ''}", poll_s, give_up_s, out))
            except httpx.HTTPError as exc:  # counted, never lost: a request that got no answer
                out["jobs"].append({"status": f"no answer ({type(exc).__name__})"})
            n += 1
            if until is None or time.monotonic() >= until:
                return


def _one_job(
    http: httpx.Client, dish: str, poll_s: float | None, give_up_s: float, out: dict[str, Any]
) -> dict[str, Any]:
    t0 = time.monotonic()
    created = http.post("/recipes", json={"dish": dish})
    out["posts"].append(time.monotonic() - t0)
    if created.status_code != 202:
        return {"status": f"HTTP {created.status_code}"}
    job_id = created.json()["jobId"]
    poll_s = poll_s or created.json()["pollAfterMs"] / 1000
    while time.monotonic() - t0 < give_up_s:
        asked = time.monotonic()
        doc = http.get(f"/recipes/{job_id}").json()
        out["gets"].append(time.monotonic() - asked)
        if doc["jobId"] != job_id or doc["dish"] != dish:
            return {"status": "another client's job"}  # requests answered with each other's documents
        if doc["status"] in ("SUCCEEDED", "FAILED"):
            status = doc["status"] if doc["status"] == "SUCCEEDED" else f"FAILED {doc['error']['code']}"
            return {"status": status, "terminal_s": time.monotonic() - t0}
        time.sleep(poll_s)
    return {"status": "gave up"}


def run(
    clients: int,
    poll_ms: float | None,
    overrides: dict[str, str],
    fake_pace_ms: float,
    serve_args: list[str],
    ramp_s: float = 0.0,
    settle_s: float = 0.0,
    for_s: float | None = None,
) -> dict[str, Any]:
    """``ramp_s`` 0: every client POSTs at the same instant; else client ``i`` at ``i * ramp_s / clients``.
    ``settle_s``: idle time between serve's first answer and the clients. ``for_s``: each client
    keeps starting jobs until that many seconds after the first one (None: one job each)."""
    serve = Serve(overrides, fake_pace_ms=fake_pace_ms, serve_args=serve_args)
    results: list[dict[str, Any]] = [{} for _ in range(clients)]
    barrier = threading.Barrier(clients)
    try:
        time.sleep(settle_s)
        started = time.monotonic()
        poll_s = poll_ms and poll_ms / 1000
        until = None if for_s is None else started + for_s
        threads = [
            threading.Thread(
                target=client,
                args=(serve.base, f"压测菜{i}号", poll_s, 600, results[i], barrier, i * ramp_s / clients, until),
            )
            for i in range(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - started
    finally:
        serve.stop()
    held = [line for line in serve.output().splitlines() if "front door first:" in line]
    jobs = [job for r in results for job in r.get("jobs", [])]
    return {
        "clients": clients,
        "jobs": len(jobs),
        "wall_s": wall,
        "posts": [t for r in results for t in r.get("posts", [])],
        "gets": [t for r in results for t in r.get("gets", [])],
        "terminal": [job["terminal_s"] for job in jobs if "terminal_s" in job],
        "statuses": Counter(job["status"] for job in jobs),
        "held": held,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=60)
    ap.add_argument("--poll-ms", type=float, default=None, help="default: the 202's pollAfterMs, as a client does")
    ap.add_argument("--workers", type=int, default=None, help="serve --workers (api invocations at once)")
    ap.add_argument(
        "--ramp-s",
        type=float,
        default=0.0,
        help="clients arrive evenly over this many seconds (0: all in the same instant)",
    )
    ap.add_argument(
        "--for-s",
        type=float,
        default=None,
        help="each client starts a new job as soon as its last one ends, for this many seconds",
    )
    ap.add_argument("--fake-pace-ms", type=float, default=2.0)
    ap.add_argument("--settle-s", type=float, default=0.0, help="wait this long after serve first answers")
    ap.add_argument("--no-front-door-first", action="store_true", help="pass it to serve (for comparison)")
    ap.add_argument("--parameter-overrides", nargs="*", default=[])
    args = ap.parse_args()
    overrides = dict(kv.split("=", 1) for kv in args.parameter_overrides)
    r = run(
        args.clients,
        args.poll_ms,
        overrides,
        args.fake_pace_ms,
        [
            *(["--workers", str(args.workers)] if args.workers else []),
            *(["--no-front-door-first"] if args.no_front_door_first else []),
        ],
        args.ramp_s,
        args.settle_s,
        args.for_s,
    )
    arrival = f"arriving over {args.ramp_s:g} s" if args.ramp_s else "at once"
    again = f", each starting jobs for {args.for_s:g} s" if args.for_s else ""
    print(
        f"{r['jobs']} jobs from {r['clients']} clients {arrival}{again} through chuixiang serve, "
        f"wall {r['wall_s']:.1f} s"
    )
    for name, times in (("POST", r["posts"]), ("GET", r["gets"])):
        if times:
            print(
                f"  {name:15s} p50 {statistics.median(times) * 1000:7.0f} ms   p95 "
                f"{percentile(times, 95) * 1000:7.0f} ms   max {max(times) * 1000:7.0f} ms   ({len(times)})"
            )
    if r["terminal"]:
        print(
            f"  to terminal     p50 {statistics.median(r['terminal']):7.1f} s    p95 "
            f"{percentile(r['terminal'], 95):7.1f} s    max {max(r['terminal']):7.1f} s"
        )
    print("  statuses: " + ", ".join(f"{k} {v}" for k, v in r["statuses"].most_common()))
    for line in r["held"]:
        print("  serve: " + line.split("front door first:", 1)[1].strip())


if __name__ == "__main__":
    main()
