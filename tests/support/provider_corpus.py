"""The provider corpus (``tests/provider_streams/``) and a loopback server that replays it.

Each corpus file is what one provider sent for one streamed chat request: ``#`` header lines (where it
comes from, how faithful it is, what a reader must make of it), a blank line, then the body byte for
byte. The server writes a body the way a model does, in several reads, with the Content-Type a test
chooses (gateways relabel streams ``application/json`` or drop the header).
"""

from __future__ import annotations

import base64
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from model_samples import make_png, recipe_for, section_doc

CORPUS = Path(__file__).parents[1] / "provider_streams"


@dataclass(frozen=True)
class Recording:
    name: str
    source: str
    provider: str
    fidelity: str
    expect: dict[str, Any]
    body: bytes

    @property
    def is_document(self) -> bool:
        return bool(self.expect.get("document"))

    def usage(self) -> dict[str, Any] | None:
        """The usage object the provider sent (its last event carrying one with ``prompt_tokens``)."""
        found = None
        for line in self.body.decode().splitlines():
            if line.startswith("data: {") and '"usage"' in line:
                usage = json.loads(line[6:]).get("usage")
                if isinstance(usage, dict) and "prompt_tokens" in usage:
                    found = usage
        return found


def load(path: Path) -> Recording:
    raw = path.read_bytes()
    head, _, body = raw.partition(b"\n\n")
    fields = dict(line[2:].split(": ", 1) for line in head.decode().splitlines() if line.startswith("# "))
    return Recording(
        path.name, fields["source"], fields["provider"], fields["fidelity"], json.loads(fields["expect"]), body
    )


def recordings() -> list[Recording]:
    return [load(p) for p in sorted(CORPUS.iterdir()) if p.suffix in (".sse", ".body")]


# --- how a body is written: framing variants of a recorded stream ---------------------------------


def reframe(body: bytes, variant: str) -> bytes:
    """The same events with another of the framings the SSE standard allows (and providers use)."""
    if variant == "as-recorded":
        return body
    if variant == "crlf":
        return body.replace(b"\n", b"\r\n")
    if variant == "cr":
        return body.replace(b"\n", b"\r")
    if variant == "no-space":
        return b"\n".join(
            line.replace(b"data: ", b"data:", 1) if line.startswith(b"data: ") else line for line in body.split(b"\n")
        )
    if variant == "bom":
        return b"\xef\xbb\xbf" + body
    raise ValueError(variant)


def events(body: bytes) -> list[bytes]:
    """The body cut after each blank line (whatever the line ending): one event per write, as a model sends."""
    out, start, i = [], 0, 0
    for terminator in (b"\r\n\r\n", b"\n\n", b"\r\r"):
        if terminator in body:
            break
    else:
        return [body]
    while (i := body.find(terminator, start)) != -1:
        out.append(body[start : i + len(terminator)])
        start = i + len(terminator)
    if start < len(body):
        out.append(body[start:])
    return out


def random_cuts(body: bytes, seed: str, pieces: int = 7) -> list[bytes]:
    """The body cut at random points (inside lines and UTF-8 characters too), reproducibly per ``seed``."""
    rng = random.Random(seed)  # nosec B311  # test data
    cuts = sorted(rng.sample(range(1, len(body)), min(pieces, len(body) - 1))) if len(body) > 1 else []
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


# --- carrying a recipe in a recorded envelope -------------------------------------------------------


def with_content(body: bytes, text: str) -> bytes:
    """The recorded stream with its content replaced by ``text``, every other field as recorded: the content
    chunks share ``text`` in order; a frame that repeats the whole answer as ``message`` repeats ``text``."""
    docs: list[Any] = []
    for event in events(body):
        data = b"\n".join(line[5:].strip() for line in event.splitlines() if line.startswith(b"data:"))
        docs.append(None if not data or data == b"[DONE]" else json.loads(data))
    slots = [d for d in docs if isinstance(d, dict) and _delta_text(d) is not None]
    size = -(-len(text) // max(1, len(slots)))
    for i, doc in enumerate(slots):
        doc["choices"][0]["delta"]["content"] = text[i * size : (i + 1) * size]
    for doc in docs:
        if isinstance(doc, dict) and doc.get("choices") and isinstance(doc["choices"][0].get("message"), dict):
            doc["choices"][0]["message"]["content"] = text
    out = b""
    for event, doc in zip(events(body), docs, strict=True):
        out += event if doc is None else b"data: " + json.dumps(doc, ensure_ascii=False).encode() + b"\n\n"
    return out


def _delta_text(doc: dict[str, Any]) -> str | None:
    choices = doc.get("choices")
    delta = choices[0].get("delta") if isinstance(choices, list) and choices else None
    content = delta.get("content") if isinstance(delta, dict) else None
    return content if isinstance(content, str) and content else None


# --- the server -----------------------------------------------------------------------------------


@dataclass
class Replay:
    """What the server answers next: the body, how it is cut into writes, and its Content-Type."""

    body: bytes
    writes: Callable[[bytes], list[bytes]] = events
    content_type: str | None = "text/event-stream"
    status: int = 200


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that closes its keep-alive connection after ``[DONE]`` is not an error."""


@dataclass
class ReplayServer:
    """An OpenAI-compatible endpoint on loopback that answers every chat request with ``replay`` (or, a request
    naming a recipe section, ``by_section``'s replay of it) and every images request with a real PNG as
    ``b64_json``."""

    replay: Replay
    chat_requests: list[dict[str, Any]] = field(default_factory=list)
    by_section: dict[str, Replay] = field(default_factory=dict)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                if self.path.endswith("/images/generations"):
                    data = json.dumps({"data": [{"b64_json": base64.b64encode(make_png()).decode()}]}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                server.chat_requests.append(request)
                replay = server.by_section.get(self.headers.get("X-Recipe-Section") or "", server.replay)
                self.send_response(replay.status)
                if replay.content_type:
                    self.send_header("Content-Type", replay.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for piece in replay.writes(replay.body):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        self._http = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> ReplayServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Recorded envelopes that carry a whole answer in their content: each gets the recipe instead.
RECIPE_CARRIERS = [
    "openai-gpt-4.1-nano-text.sse",
    "deepseek-v4-flash-reasoning.sse",
    "groq-llama-3.3-70b-text.sse",
    "moonshot-kimi-k2.5-usage-in-choice.sse",
    "minimax-m2.7-terminal-message-frame.sse",
    "qwen3-max-dashscope-text.sse",
]


def recipe_stream(name: str, section: str | None = None) -> bytes:
    """The recording ``name`` with a whole recipe (or one ``section`` of it) as its content (the envelope as the
    provider sent it)."""
    recording = next(r for r in recordings() if r.name == name)
    return with_content(recording.body, json.dumps(section_doc(recipe_for("番茄炒蛋"), section), ensure_ascii=False))
