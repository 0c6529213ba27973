"""Per-chunk CPU cost of reading a 50 000-chunk SSE stream: our reader vs the openai SDK vs plain httpx.

The stream is served from a separate process (so its CPU is not counted) on loopback;
each client reads the identical bytes. CPU time is the reading process's
``time.process_time()`` divided by the number of chunks.

    .venv/bin/python bench/stream_reader.py [--chunks 50000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from chuixiang.deadline import Budget
from chuixiang.upstream.chat import StreamLimits, read_chat_completion


def build_stream(chunks: int) -> bytes:
    out = [b": connected\n\n"]
    for i in range(chunks):
        doc = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": "bench",
               "choices": [{"index": 0, "delta": {"content": "番茄" if i % 2 else "炒蛋"}, "finish_reason": None}]}
        out.append(b"data: " + json.dumps(doc, ensure_ascii=False).encode() + b"\n\n")
    out.append(b'data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,'
               b'"delta":{},"finish_reason":"stop"}]}\n\n')
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def serve(port_queue: multiprocessing.Queue, chunks: int) -> None:  # type: ignore[type-arg]
    body = build_stream(chunks)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            view = memoryview(body)
            for i in range(0, len(body), 16384):  # network-sized writes
                self.wfile.write(view[i : i + 16384])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_queue.put(server.server_address[1])
    server.serve_forever()


def ours(base: str) -> int:
    with httpx.Client() as client:
        limits = StreamLimits(first_content_s=60, idle_s=30, max_chunks=10**7, max_bytes=10**9)
        c = read_chat_completion(client, f"{base}/chat/completions", {"stream": True}, {}, limits=limits,
                                 deadline=Budget(600_000, None).attempt(600_000))
    return c.chunks


def openai_sdk(base: str) -> int:
    from openai import OpenAI

    client = OpenAI(base_url=base, api_key="bench")
    n = 0
    parts = []
    for chunk in client.chat.completions.create(model="bench", messages=[{"role": "user", "content": "x"}],
                                                stream=True):
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    q: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    proc = multiprocessing.Process(target=serve, args=(q, args.chunks), daemon=True)
    proc.start()
    base = f"http://127.0.0.1:{q.get(timeout=30)}/v1"
    results: dict[str, list[float]] = {}
    try:
        for _ in range(args.rounds):
            readers = (("chuixiang reader", ours), ("openai SDK", openai_sdk), ("plain httpx iter_lines", plain_httpx))
            for name, fn in readers:
                cpu0, wall0 = time.process_time(), time.perf_counter()
                n = fn(base)
                cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
                results.setdefault(name, []).append(cpu / n * 1e6)
                results.setdefault(name + " wall", []).append(wall / n * 1e6)
    finally:
        proc.terminate()
    print(f"{args.chunks} chunks, {args.rounds} rounds, median per chunk")
    for name in ("chuixiang reader", "openai SDK", "plain httpx iter_lines"):
        print(f"  {name:<24} CPU {statistics.median(results[name]):6.1f} µs   wall "
              f"{statistics.median(results[name + ' wall']):6.1f} µs")
    ratio = statistics.median(results["openai SDK"]) / statistics.median(results["chuixiang reader"])
    print(f"  openai SDK / chuixiang reader = {ratio:.1f}x")


if __name__ == "__main__":
    main()
