"""How late the recipe reader closes the connection after each of its limits.

20 runs each against the fault-injecting fake model on loopback: keep-alives only
(first-content limit), a stall mid-stream (idle limit) and a slow drip under the
idle limit (total deadline). Lateness is the measured give-up time minus the limit.
Each is run with progress reporting off and on (a reporter thread parsing and
"writing" every 100 ms, 20x production's interval), to show the reporter never
delays a give-up.

    .venv/bin/python bench/give_up_lateness.py [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from chuixiang.deadline import Budget
from chuixiang.generation.progress import ProgressReporter
from chuixiang.upstream.chat import ChatRequest, chat_call
from chuixiang.upstream.chat_reader import Follow, StreamLimits
from chuixiang.upstream.failures import UpstreamTimeout
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

IDLE_S, FIRST_S, TOTAL_S = 0.5, 0.8, 1.0


def _slow_write(progress: object, partial: object) -> bool:
    time.sleep(0.01)  # a DynamoDB round trip
    return True


def once(fake: FakeModel, behaviour: ChatBehaviour, since_last_byte: bool, progress: bool) -> float:
    """Seconds from the attempt start (or from the last byte received) to the give-up."""
    fake.chat_script.append(behaviour)
    reporter = ProgressReporter(_slow_write, interval_s=0.1, expected_tokens=1600)
    with httpx.Client() as client, reporter:
        deadline = Budget(60_000, None).attempt(TOTAL_S * 1000)
        started = time.monotonic()
        limits = StreamLimits(first_content_s=FIRST_S, idle_s=IDLE_S, max_chunks=10**6)
        request = ChatRequest(f"{fake.base_url}/chat/completions", {"stream": True, "messages": []}, limits)
        observer = Follow(reporter.watch) if progress else None
        done = chat_call(client, request, deadline, observer=observer)
        if isinstance(done.failure, UpstreamTimeout):
            elapsed = time.monotonic() - started
            return elapsed - (done.completion.last_byte_ms or 0) / 1000 if since_last_byte else elapsed
    raise AssertionError("did not time out")


def report(name: str, lateness_ms: list[float]) -> None:
    ordered = sorted(lateness_ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    print(
        f"  {name:<34} p50 {statistics.median(ordered):6.1f} ms   p99 {p99:6.1f} ms   "
        f"max {ordered[-1]:6.1f} ms   min {ordered[0]:6.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    for progress in (False, True):
        with FakeModel(pace_s=0.001) as fake:
            # Idle: silence is counted from the last byte received; total: from the attempt start.
            stall = [
                (once(fake, ChatBehaviour(stall_after_chunks=5, stall_s=10), True, progress) - IDLE_S) * 1000
                for _ in range(args.runs)
            ]
            drip = [
                (once(fake, ChatBehaviour(chunk_delay_s=0.1), False, progress) - TOTAL_S) * 1000
                for _ in range(args.runs)
            ]
            queued = [
                (
                    once(fake, ChatBehaviour(stall_after_chunks=0, stall_s=10, keepalive_every_s=0.1), False, progress)
                    - FIRST_S
                )
                * 1000
                for _ in range(args.runs)
            ]
        print(
            f"give-up lateness over {args.runs} runs (first content {FIRST_S * 1000:.0f} ms, idle "
            f"{IDLE_S * 1000:.0f} ms, total {TOTAL_S * 1000:.0f} ms), progress {'on' if progress else 'off'}"
        )
        report("first content (keep-alives only)", queued)
        report("idle limit (stall mid-stream)", stall)
        report("total deadline (slow drip)", drip)


if __name__ == "__main__":
    main()
