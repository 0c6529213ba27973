"""Per-chunk CPU cost of reading an SSE stream: our reader (with and without progress reporting)
vs the openai SDK vs plain httpx.

Two workloads, served from a separate process (so its CPU is not counted) on loopback:

* ``paced`` (realistic, printed first): one event per write, flushed, one every ``--pace-ms``,
  as a model streaming tokens does, so the client gets about one event per read;
* ``bulk``: the same events written 16 KiB at a time (hundreds of events per read), which
  flatters every reader and shows only the parser's cost.

The content is a real recipe cut into 3-character deltas, so the progress reporter parses
the partial JSON as it would in production. CPU time is the reading process's
``time.process_time()`` (every thread, the reporter's included) divided by the events read.

    .venv/bin/python bench/stream_reader.py [--paced-chunks 3000] [--pace-ms 1] [--bulk-chunks 50000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from model_samples import recipe_for

from chuixiang.deadline import Budget
from chuixiang.generation.progress import ProgressReporter
from chuixiang.upstream.chat import ChatRequest, read_chat_completion
from chuixiang.upstream.chat_reader import Follow, StreamLimits

#: Progress writes in the benchmark: 20x production's 2 s interval, each "write" waiting like DynamoDB would.
PROGRESS_INTERVAL_S = 0.1
WRITE_LATENCY_S = 0.01


def build_events(chunks: int) -> list[bytes]:
    recipe = json.dumps(recipe_for("番茄炒蛋"), ensure_ascii=False)
    pieces = [recipe[i : i + 3] for i in range(0, len(recipe), 3)]
    out = [b": connected\n\n"]
    for i in range(chunks):
        # The recipe, then filler once it is written (a long answer's tail).
        text = pieces[i] if i < len(pieces) else "。"
        doc = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "bench",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        }
        out.append(b"data: " + json.dumps(doc, ensure_ascii=False).encode() + b"\n\n")
    out.append(
        b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,'
        b'"delta":{},"finish_reason":"stop"}]}\n\n'
    )
    out.append(b"data: [DONE]\n\n")
    return out


def serve(port_queue: multiprocessing.Queue, chunks: int, pace_s: float) -> None:  # type: ignore[type-arg]
    events = build_events(chunks)
    body = b"".join(events)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if pace_s:  # one event per write, like a model streaming tokens
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
                    time.sleep(pace_s)
                return
            view = memoryview(body)
            for i in range(0, len(body), 16384):  # network-sized writes
                self.wfile.write(view[i : i + 16384])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_queue.put(server.server_address[1])
    server.serve_forever()


def ours(base: str, progress: ProgressReporter | None = None) -> int:
    with httpx.Client() as client:
        limits = StreamLimits(first_content_s=60, idle_s=30, max_chunks=10**7, max_bytes=10**9)
        c = read_chat_completion(
            client,
            ChatRequest(f"{base}/chat/completions", {"stream": True}, limits),
            Budget(600_000, None).attempt(600_000),
            observer=Follow(progress.watch) if progress else None,
        )
    return c.chunks


def ours_with_progress(base: str) -> int:
    """The reader with a progress reporter on its own thread, as the recipe stage runs it."""
    writes: list[int] = []

    def write(progress: object, partial: object) -> bool:
        writes.append(1)
        time.sleep(WRITE_LATENCY_S)  # a DynamoDB round trip (the GIL is released meanwhile)
        return True

    with ProgressReporter(write, interval_s=PROGRESS_INTERVAL_S, expected_tokens=1600) as reporter:
        n = ours(base, reporter)
    return n


def openai_sdk(base: str) -> int:
    from openai import OpenAI

    client = OpenAI(base_url=base, api_key="bench")
    n = 0
    parts = []
    for chunk in client.chat.completions.create(
        model="bench", messages=[{"role": "user", "content": "x"}], stream=True
    ):
        n += 1
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    return n


def plain_httpx(base: str) -> int:
    n = 0
    parts = []
    with httpx.Client() as client, client.stream("POST", f"{base}/chat/completions", json={}) as r:
        for line in r.iter_lines():
            if line.startswith("data:") and line != "data: [DONE]":
                doc = json.loads(line[5:])
                n += 1
                if doc["choices"] and doc["choices"][0]["delta"].get("content"):
                    parts.append(doc["choices"][0]["delta"]["content"])
    return n


READERS = (
    ("chuixiang reader", ours),
    ("chuixiang + progress", ours_with_progress),
    ("openai SDK", openai_sdk),
    ("plain httpx iter_lines", plain_httpx),
)


def run(workload: str, chunks: int, pace_s: float, rounds: int) -> None:
    q: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    proc = multiprocessing.Process(target=serve, args=(q, chunks, pace_s), daemon=True)
    proc.start()
    base = f"http://127.0.0.1:{q.get(timeout=30)}/v1"
    results: dict[str, list[float]] = {}
    try:
        for _ in range(rounds):
            for name, fn in READERS:
                cpu0, wall0 = time.process_time(), time.perf_counter()
                n = fn(base)
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                results.setdefault(name, []).append(cpu / n * 1e6)
                results.setdefault(name + " wall", []).append(wall / n * 1e6)
    finally:
        proc.terminate()
    print(f"{workload}: {chunks} chunks, {rounds} rounds, median per chunk")
    for name, _ in READERS:
        print(
            f"  {name:<24} CPU {statistics.median(results[name]):6.1f} µs   wall "
            f"{statistics.median(results[name + ' wall']):7.1f} µs"
        )

    def cpu(name: str) -> float:
        return statistics.median(results[name])

    print(
        f"  progress on / off = {cpu('chuixiang + progress') / cpu('chuixiang reader'):.2f}x   "
        f"openai SDK / chuixiang reader = {cpu('openai SDK') / cpu('chuixiang reader'):.2f}x   "
        f"chuixiang / plain httpx = {cpu('chuixiang reader') / cpu('plain httpx iter_lines'):.2f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--paced-chunks", type=int, default=3000)
    ap.add_argument("--pace-ms", type=float, default=1.0)
    ap.add_argument("--bulk-chunks", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    run(f"paced (one event per write every {args.pace_ms:g} ms)", args.paced_chunks, args.pace_ms / 1000, args.rounds)
    run("bulk (16 KiB writes)", args.bulk_chunks, 0, args.rounds)


if __name__ == "__main__":
    main()
