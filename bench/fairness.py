"""Fairness under load: N clients, each its own caller, that obey ``Retry-After``, for a fixed time.

Starts ``chuixiang serve`` (embedded fake model; ``--slots`` as ``RecipeConcurrency``, ``--per-caller`` as
``RecipeConcurrencyPerCaller``), or uses one already running (``--base-url``). Each client connects from an
address of its own on loopback (127.0.1.<n>: without an authorizer the API tells callers apart by source
address) and loops until the time is up: POST a dish of its own; on 429 wait ``Retry-After`` and POST again;
on 202 poll every ``pollAfterMs`` to the end, then start the next dish at once. Prints each client's jobs
finished and 429s, the worst client's count, how many finished none, and Jain's fairness index (1 = equal).

    .venv/bin/python bench/fairness.py [--clients 60] [--for-s 90] [--slots 20] [--per-caller 2]
                                       [--fake-pace-ms 40] [--warm-up-s 0] [--base-url URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.serve import Serve  # the same launcher the tests use


def client(n: int, base: str, until: float, start: threading.Barrier, out: dict[str, Any]) -> None:
    """One caller: POST, wait out 429s as told, poll the job to its end; again, until ``until``."""
    out.update(finished=0, refused=0, failed=0, cut=0, waited_s=0.0)
    transport = httpx.HTTPTransport(local_address=f"127.0.1.{n + 1}")
    with httpx.Client(base_url=base, transport=transport, timeout=30) as http:
        start.wait()
        dish = 0
        while time.monotonic() < until:
            created = http.post("/recipes", json={"dish": f"第{n}号的菜{dish}"})
            if created.status_code == 429:
                out["refused"] += 1
                wait = float(created.headers["Retry-After"])
                out["waited_s"] += wait
                time.sleep(min(wait, max(0.0, until - time.monotonic())))
                continue
            created.raise_for_status()
            dish += 1
            status = _poll(http, created.json(), until)
            out[{"SUCCEEDED": "finished", "FAILED": "failed"}.get(status, "cut")] += 1


def _poll(http: httpx.Client, created: dict[str, Any], until: float) -> str:
    """Poll a job as a client told ``pollAfterMs`` does; its last status (RUNNING when the time ran out)."""
    doc = created
    while time.monotonic() < until:
        time.sleep(min((doc.get("pollAfterMs") or 1000) / 1000, max(0.0, until - time.monotonic())))
        doc = http.get(f"/recipes/{created['jobId']}").json()
        if doc["status"] in ("SUCCEEDED", "FAILED"):
            return str(doc["status"])
    return "RUNNING"


def run(base: str, clients: int, for_s: float, warm_up_s: float = 0) -> list[dict[str, Any]]:
    """``warm_up_s``: first let the clients run that long, uncounted, so ``Retry-After`` is measured (an
    hour's jobs in production), then count ``for_s``."""
    if warm_up_s:
        run(base, clients, warm_up_s)
    outs: list[dict[str, Any]] = [{} for _ in range(clients)]
    start = threading.Barrier(clients)
    until = time.monotonic() + for_s
    threads = [threading.Thread(target=client, args=(n, base, until, start, outs[n])) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outs


def summary(outs: list[dict[str, Any]]) -> dict[str, Any]:
    done = [o["finished"] for o in outs]
    jain = sum(done) ** 2 / (len(done) * sum(d * d for d in done)) if any(done) else 0.0
    return {
        "clients": len(outs),
        "jobsFinished": sum(done),
        "worstClient": min(done),
        "bestClient": max(done),
        "medianClient": statistics.median(done),
        "clientsWithNone": sum(1 for d in done if d == 0),
        "jainIndex": round(jain, 3),
        "refused429": sum(o["refused"] for o in outs),
        "failed": sum(o["failed"] for o in outs),
        "runningAtTheEnd": sum(o["cut"] for o in outs),
        "perClient": done,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=60)
    parser.add_argument("--for-s", type=float, default=90)
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--per-caller", type=int, default=2)
    parser.add_argument("--fake-pace-ms", type=float, default=40)
    parser.add_argument("--warm-up-s", type=float, default=0, help="run uncounted first: job times measured")
    parser.add_argument("--base-url", help="a serve already running (its own parameters)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.base_url:
        outs = run(args.base_url, args.clients, args.for_s, args.warm_up_s)
    else:
        overrides = {"RecipeConcurrency": str(args.slots), "RecipeConcurrencyPerCaller": str(args.per_caller)}
        with Serve(overrides, fake_pace_ms=args.fake_pace_ms) as serve:
            outs = run(serve.base, args.clients, args.for_s, args.warm_up_s)
    result = summary(outs)
    if args.json:
        print(json.dumps(result))
        return 0
    print("client  finished  429s  waited_s")
    for n, o in enumerate(outs):
        print(f"{n:>6}  {o['finished']:>8}  {o['refused']:>4}  {o['waited_s']:>8.0f}")
    print({k: v for k, v in result.items() if k != "perClient"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
