"""An OpenAI-compatible model on loopback that can also misbehave on purpose.

``make run`` uses it with the default behaviour: a valid recipe for any dish,
streamed as SSE at a configurable pace, and a real PNG. Tests and benchmarks
queue :class:`ChatBehaviour` / :class:`ImageBehaviour` scripts to inject faults
(early 5xx, stalls, slow drips, resets, broken JSON ...) on a real socket.
A model named after one of :data:`~chuixiang_local.model.profiles.PROFILES`
(``fake-steady``, ``fake-peak`` …) plays that measured behaviour, ``pace_s`` per
token of the steady model (so its real timings are scaled by ``time_scale``).
"""

from __future__ import annotations

import base64
import json
import random
import re
import select
import signal
import socket
import struct
import subprocess  # nosec B404  # FakeModelProcess starts our own module
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from model_samples import largest_recipe, make_png, recipe_for, section_doc, token_pieces, with_key_chunks

from chuixiang_local.model.key_quota import KeyQuota, reservation_of, retry_after_headers
from chuixiang_local.model.profiles import PROFILES, REAL_MS_PER_TOKEN, ModelProfile, profile_text
from chuixiang_local.servers import exit_with_parent, stop_server


@dataclass
class ChatBehaviour:
    """How the fake answers one chat request. Defaults: a valid recipe, streamed."""

    #: ok|reasoning_only|error_mid|length|json|eof_no_done|reset_mid|garbage|think|largest (the largest recipe kept)
    #: |not_json (a 200 whose body is not JSON)|step_short (a steps range one step short: the parts do not merge)
    #: |whole_recipe (a section request answered with the whole recipe: a model that ignores the section prompt)
    #: |surrogate (a lone surrogate, ``\ud83c``, in the JSON's first string)|surrogate_delta (one decoded from the
    #: event's ``delta.content``, as OpenRouter was reported to send)|extra_titles (an outline with two titles
    #: more than the steps written)|titles_then_stall (an outline that stalls for ``stall_s`` once its titles close).
    #: With ``echo_headers`` the error_mid, garbage and not_json answers carry the request's headers (the key among
    #: them), as a leaky proxy's do; error_mid as an ``event: error``.
    kind: str = "ok"
    status: int = 200
    headers_delay_s: float = 0.0  #: silence before the status line
    chunk_delay_s: float | None = None  #: pace between chunks (None: the server's pace)
    chunk_chars: int = 4
    stall_after_chunks: int | None = None
    stall_s: float = 0.0
    keepalive_every_s: float | None = None  #: SSE comments sent while stalled
    retry_after: str | None = None
    echo_headers: bool = False  #: an error answer that echoes the request's headers (a leaky proxy)
    #: An answer whose first string echoes the request's key, written as this function writes it (a proxy's encoding)
    echo_key_as: Callable[[str], str] | None = None
    body_delay_s: float = 0.0  #: kind "json": headers at once, the document this much later (not streaming)


@dataclass
class ImageBehaviour:
    #: ok|garbage|stall|url (answer with a link to the picture, as dall-e-* does by default)
    #: |echo (a 200 answer that is not an images answer and echoes the request's headers)
    #: |key_in_chunks (a real picture whose ancillary chunks carry the request's key, as a proxy was seen to write it)
    kind: str = "ok"
    status: int = 200
    delay_s: float = 0.0
    size_bytes: int | None = None  #: pad the PNG to this size (e.g. the 8 MiB the image stage accepts)


@dataclass
class FakeModel:
    """Threaded HTTP server; ``start()`` returns the base URL (``…/v1``)."""

    pace_s: float = 0.002
    host: str = "127.0.0.1"
    port: int = 0
    chat_script: deque[ChatBehaviour] = field(default_factory=deque)
    image_script: deque[ImageBehaviour] = field(default_factory=deque)
    #: Standing behaviour of a model name (before the scripts): a model that is down, queued, slow…
    chat_by_model: dict[str, ChatBehaviour] = field(default_factory=dict)
    #: Standing behaviour of a recipe section (the ``X-Recipe-Section`` header: a name such as ``extras``, or
    #: ``steps`` for every range of steps), before the model's.
    chat_by_section: dict[str, ChatBehaviour] = field(default_factory=dict)
    image_by_model: dict[str, ImageBehaviour] = field(default_factory=dict)
    requests: list[tuple[str, float, str]] = field(default_factory=list)  #: (path, monotonic time, model)
    #: Each chat request's ``X-Recipe-Section`` (None: a whole recipe), in the order of ``requests``.
    sections: list[str | None] = field(default_factory=list)
    #: Streams the client closed before their end: (path, monotonic time the write failed, model).
    hung_up: list[tuple[str, float, str]] = field(default_factory=list)
    #: The section of each stream in ``hung_up`` (None: a whole recipe), in the same order.
    hung_up_sections: list[str | None] = field(default_factory=list)
    #: What each stream in ``hung_up`` asked (its messages, as sent), in the same order: whose call it was.
    hung_up_asked: list[str] = field(default_factory=list)
    #: Faults played mid-stream: (kind, monotonic time, the request's section).
    faults: list[tuple[str, float, str | None]] = field(default_factory=list)
    #: Each chat answer's section (None: a whole recipe) and the monotonic time its answer ended.
    answered: list[tuple[str | None, float]] = field(default_factory=list)
    #: Requests being answered now, and the most at once since the last reset.
    open_requests: int = 0
    most_open: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)  #: each POST's JSON body, in order
    #: Pictures answered as a URL, served by GET until the model stops.
    files: dict[str, bytes] = field(default_factory=dict)

    #: Draws of the profiles that give a range (seeded, so a bench repeats).
    seed: int = 7
    #: The key's quotas (requests at once, tokens per minute counted at admission): 429 beyond them.
    key_quota: KeyQuota = field(default_factory=KeyQuota)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.lock = threading.Lock()
        self.rng = random.Random(self.seed)  # nosec B311  # a simulation's draws, not a secret
        self._prompts: dict[str, deque[str]] = {}  #: per model, the prompts seen lately (its prefix cache)
        self._key_free_at: dict[str, float] = {}  #: per capped profile, when its key may send the next token

    def cached_tokens(self, model: str, prompt: str) -> int:
        """The prompt's tokens a provider's prefix cache would have held: the longest prefix shared with a
        prompt seen before on ``model``, in whole blocks of 64 tokens (as DeepSeek caches; OpenAI from 1,024)."""
        with self.lock:
            seen = self._prompts.setdefault(model, deque(maxlen=256))
            shared = max((common_prefix(prompt, earlier) for earlier in seen), default=0)
            seen.append(prompt)
        return int(shared / 1.2) // 64 * 64

    def key_slot(self, profile: str, due: float, per_token_s: float) -> float:
        """When a token due at ``due`` may go out on a key that sends one per ``per_token_s`` over all streams."""
        with self.lock:
            at = max(due, self._key_free_at.get(profile, 0.0))
            self._key_free_at[profile] = at + per_token_s
        return at

    @property
    def time_scale(self) -> float:
        """How much faster than real time the profiles play (``pace_s`` per token vs 18 tokens/s)."""
        return self.pace_s * 1000 / REAL_MS_PER_TOKEN

    # --- control ---------------------------------------------------------------------------

    def start(self) -> str:
        model = self

        class Handler(_Handler):
            fake = model

        self._server = _Server((self.host, self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self.base_url

    @property
    def base_url(self) -> str:
        assert self._server is not None  # nosec B101  # test double, type narrowing
        return f"http://{self.host}:{self._server.server_address[1]}/v1"

    def stop(self) -> None:
        self._stop.set()
        if self._server:
            stop_server(self._server)
            self._server.server_close()

    def count(self, path_suffix: str, model: str | None = None) -> int:
        return sum(1 for path, _, m in self.requests if path.endswith(path_suffix) and model in (None, m))

    def __enter__(self) -> FakeModel:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait(self, seconds: float) -> bool:
        """Sleep that ends early when the server stops; True if it was stopped."""
        return self._stop.wait(seconds)


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed its connection (a keep-alive dropped, a stream we were told to stop) is no
        error of the model's: not printed."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def _dish(body: dict[str, Any]) -> str:
    """The dish the request names: its ``菜名：…`` message (a section's request has more after it)."""
    messages = body.get("messages") or [{}]
    named = [str(m.get("content", "")) for m in messages if re.match(r"^菜名[:：]", str(m.get("content", "")))]
    user = named[0] if named else str(messages[-1].get("content", ""))
    return re.sub(r"^菜名[:：]\s*", "", user).strip() or "番茄炒蛋"


def _prompt(body: dict[str, Any]) -> str:
    return "".join(f"{m.get('role')}:{m.get('content')}\n" for m in body.get("messages") or [])


def prompt_tokens_of(body: dict[str, Any]) -> int:
    """The prompt tokens the fake bills a request: its messages' characters at 1.2 a token."""
    return max(1, int(len(_prompt(body)) / 1.2))


def common_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share: a binary search over slices compared in C. A prompt is
    compared with the last 256 on its model, each sharing a system prompt of thousands of characters: a loop over
    the characters in Python was the fake's largest cost (~2 % of a job's CPU over every process)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _chunk_base(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "fake"),
    }


#: A lone surrogate as a model's JSON carries it: half of 🍅 (U+1F345), the other half never sent.
LONE_SURROGATE = "\\ud83c"
#: One as OpenRouter's stream was reported to carry it in ``delta.content`` itself (the event's JSON escapes it,
#: the reader decodes it into the text): Kohaku-Lab/KohakuTerrarium pull request 48.
DECODED_SURROGATE = "\udcaf"


def answer_text(body: dict[str, Any], b: ChatBehaviour, section: str | None) -> str:
    """The JSON text a chat answer writes for ``section`` (None: the whole recipe), with ``b``'s defect."""
    dish = _dish(body)
    recipe = largest_recipe(dish) if b.kind == "largest" else recipe_for(dish)
    if b.kind == "extra_titles":  # the outline promises more steps than the steps sections write
        recipe["stepTitles"] = [*recipe["stepTitles"], "装盘点缀", "趁热上桌"]
    doc = section_doc(recipe, None if b.kind == "whole_recipe" else section)
    if b.kind == "step_short" and "steps" in doc:  # a range one step short: the parts do not merge
        doc["steps"] = doc["steps"][:-1]
    text = json.dumps(doc, ensure_ascii=False)
    if b.kind in ("surrogate", "surrogate_delta"):  # into the first string value (the recipe's name)
        quote = text.index('": "') + 4
        text = text[:quote] + (LONE_SURROGATE if b.kind == "surrogate" else DECODED_SURROGATE) + text[quote:]
    return text


#: How often a silent handler looks whether the fake is stopping.
_STOP_CHECK_S = 0.1


class _Handler(BaseHTTPRequestHandler):
    fake: FakeModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        model = str(body.get("model", "")) if isinstance(body, dict) else ""
        fake = self.fake
        section = self.headers.get("X-Recipe-Section")
        with fake.lock:  # one order for the three lists
            fake.requests.append((self.path, time.monotonic(), model))
            fake.sections.append(section)
            fake.bodies.append(body)
        if self.path.endswith("/chat/completions"):
            refusal = fake.key_quota.admit(reservation_of(body, prompt_tokens_of(body)), section)
            if refusal is not None:
                self._json(429, refusal.body(), retry_after_headers(refusal))
                return
            try:
                self._chat_admitted(body, model, section)
            finally:
                fake.key_quota.done()
        elif self.path.endswith("/images/generations"):
            image = fake.image_by_model.get(model) or (fake.image_script.popleft() if fake.image_script else None)
            self._image(body, image or ImageBehaviour())
        else:
            self._json(404, {"error": {"message": "not found"}})

    def _chat_admitted(self, body: dict[str, Any], model: str, section: str | None) -> None:
        """A chat request the key's quotas admitted."""
        fake = self.fake
        chat = self._section_behaviour(section) or fake.chat_by_model.get(model)
        chat = chat or (fake.chat_script.popleft() if fake.chat_script else None)
        self._count_open(+1)
        try:
            if chat is None and model in PROFILES:
                self._profile(body, PROFILES[model], section)
            else:
                self._chat(body, chat or ChatBehaviour(), section)
        finally:
            self._count_open(-1)
            with fake.lock:
                fake.answered.append((section, time.monotonic()))

    def _silent(self, seconds: float, body: dict[str, Any]) -> bool:
        """Say nothing for ``seconds`` while listening for the client's hang-up, as an HTTP server in front of
        a model does (it cancels the generation when the caller goes). True if the server stopped or the
        client hung up (recorded then, not at the next write: a hang-up belongs to the moment it happened)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            readable, _, _ = select.select([self.connection], [], [], min(left, _STOP_CHECK_S))
            if self.fake.wait(0):
                return True
            if readable and self._peer_closed():
                self._hung_up(body)
                self.close_connection = True
                return True
            if readable:  # bytes we will not read (a client does not pipeline): plain silence from here
                return self.fake.wait(max(0.0, end - time.monotonic()))
        return False

    def _peer_closed(self) -> bool:
        try:
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return peeked == b""
        except BlockingIOError:
            return False
        except OSError:  # reset
            return True

    def _hung_up(self, body: dict[str, Any]) -> None:
        with self.fake.lock:
            self.fake.hung_up.append((self.path, time.monotonic(), str(body.get("model", ""))))
            self.fake.hung_up_sections.append(self.headers.get("X-Recipe-Section"))
            self.fake.hung_up_asked.append(json.dumps(body.get("messages"), ensure_ascii=False))

    def _count_open(self, change: int) -> None:
        with self.fake.lock:
            self.fake.open_requests += change
            self.fake.most_open = max(self.fake.most_open, self.fake.open_requests)

    def _section_behaviour(self, section: str | None) -> ChatBehaviour | None:
        if section is None:
            return None
        by = self.fake.chat_by_section
        return by.get(section) or by.get(section.partition(":")[0])

    def do_GET(self) -> None:
        data = self.fake.files.get(self.path)
        if data is None:
            self._json(404, {"error": {"message": "not found"}})
            return
        self._body(200, "image/png", data)

    # --- plumbing --------------------------------------------------------------------------

    def _json(self, status: int, doc: Any, extra: dict[str, str] | None = None) -> None:
        self._body(status, "application/json", json.dumps(doc, ensure_ascii=False).encode(), extra)

    def _body(self, status: int, content_type: str, data: bytes, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _event(self, doc: Any) -> None:
        try:
            data = json.dumps(doc, ensure_ascii=False).encode()
        except UnicodeEncodeError:  # a lone surrogate: a provider's JSON carries it escaped (``\udcaf``)
            data = json.dumps(doc).encode()
        self._chunk(b"data: " + data + b"\n\n")

    def _open_stream(self, base: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self._chunk(b": connected\n\n")
        self._event({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})

    def _usage(self, body: dict[str, Any], tokens: int) -> dict[str, Any]:
        """As OpenAI reports it: the prompt's tokens (estimated from its characters) and those its prefix cache
        held, the completion's."""
        prompt = _prompt(body)
        cached = self.fake.cached_tokens(str(body.get("model", "")), prompt)
        return {
            "prompt_tokens": prompt_tokens_of(body),
            "completion_tokens": tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }

    def _close_stream(
        self, base: dict[str, Any], finish: str, tokens: int, done: bool = True, body: dict[str, Any] | None = None
    ) -> None:
        """The finish chunk, usage in a last chunk of its own (as OpenAI sends it), ``[DONE]``, end."""
        self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        self._event({**base, "choices": [], "usage": self._usage(body or {}, tokens)})
        if done:
            self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _headers_auth_first(self) -> dict[str, str]:
        """The request's headers as a leaky proxy echoes them, the credential first (so even a short snippet has it)."""
        headers = dict(self.headers.items())
        return {"Authorization": headers.pop("Authorization", ""), **headers}

    def _reset(self) -> None:
        """Abort the connection with a TCP RST, like a crashed upstream or proxy."""
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    # --- chat ------------------------------------------------------------------------------

    def _chat(self, body: dict[str, Any], b: ChatBehaviour, section: str | None = None) -> None:
        if b.headers_delay_s and self._silent(b.headers_delay_s, body):
            return
        if b.status != 200:
            self._chat_error(b)
            return
        text = answer_text(body, b, section)
        if b.echo_key_as is not None:
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            quote = text.index('": "') + 4  # into the first string value
            text = text[:quote] + json.dumps(b.echo_key_as(key))[1:-1] + text[quote:]
        echoed = json.dumps(self._headers_auth_first()) if b.echo_headers else ""
        if b.kind == "not_json":
            self._body(200, "text/html", f"<html>502 Bad Gateway; request was {echoed}</html>".encode())
        elif b.kind == "json" or not body.get("stream"):
            self._chat_document(_chunk_base(body), text, b)
        else:
            self._chat_stream(body, text, b, echoed)

    def _chat_error(self, b: ChatBehaviour) -> None:
        extra = {"Retry-After": b.retry_after} if b.retry_after else None
        error: dict[str, Any] = {"message": f"fake upstream status {b.status}", "type": "server_error"}
        if b.echo_headers:
            error["request_headers"] = dict(self.headers.items())
        self._json(b.status, {"error": error}, extra)

    def _chat_document(self, base: dict[str, Any], text: str, b: ChatBehaviour) -> None:
        """One JSON completion (``stream: false``, or a provider that ignores it), after ``body_delay_s``."""
        doc = {
            **base,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 200, "completion_tokens": len(text) // 2},
        }
        if not b.body_delay_s:
            self._json(200, doc)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        if self._silent(b.body_delay_s, base):
            return
        self._chunk(json.dumps(doc, ensure_ascii=False).encode())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chat_stream(self, body: dict[str, Any], text: str, b: ChatBehaviour, echoed: str) -> None:
        """The SSE stream, with the behaviour's faults played at their chunk."""
        base = _chunk_base(body)
        pace = self.fake.pace_s if b.chunk_delay_s is None else b.chunk_delay_s
        if b.kind == "length":
            text = text[: len(text) // 2]
        if b.kind == "think":  # reasoning written into the content, as some providers do
            text = "<think>用户要一道家常菜，先列食材，再排步骤。</think>\n" + text
        pieces = [text[i : i + b.chunk_chars] for i in range(0, len(text), b.chunk_chars)]
        stall_at = b.stall_after_chunks
        if b.kind == "titles_then_stall" and '"auxiliary"' in text:  # once the titles' array has closed
            stall_at = text.index('"auxiliary"') // b.chunk_chars + 1
        try:
            self._open_stream(base)
            for n, piece in enumerate(pieces):
                if stall_at is not None and n == stall_at and self._stall(b, body):
                    return
                fault = self._stream_fault(b, n, len(pieces), echoed)
                if fault == "ended":
                    return
                if fault == "error_sent":
                    break
                delta = {"reasoning_content": piece} if b.kind == "reasoning_only" else {"content": piece}
                self._event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                if pace and self.fake.wait(pace):
                    return
            finish = "length" if b.kind in ("length", "reasoning_only") else "stop"
            self._close_stream(base, finish, len(pieces), done=b.kind != "eof_no_done", body=body)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self._hung_up(body)
            self.close_connection = True

    def _stream_fault(self, b: ChatBehaviour, n: int, pieces: int, echoed: str) -> str:
        """Play the behaviour's fault due before chunk ``n``: ``error_sent`` (an error event: the stream ends
        after it), ``ended`` (the connection was reset) or ``""`` (none, or a garbage line: go on)."""
        if b.kind in ("error_mid", "reset_mid") and n == pieces // 3:
            self.fake.faults.append((b.kind, time.monotonic(), self.headers.get("X-Recipe-Section")))
        if b.kind == "error_mid" and n == pieces // 3:
            if echoed:
                leak = {"message": "upstream overloaded", "request_headers": json.loads(echoed)}
                self._chunk(b"event: error\ndata: " + json.dumps(leak).encode() + b"\n\n")
            else:
                self._event({"error": {"message": "upstream overloaded", "type": "server_error"}})
            return "error_sent"
        if b.kind == "reset_mid" and n == pieces // 3:
            self._reset()
            return "ended"
        if b.kind == "garbage" and n == 3:
            self._chunk(b"data: {not json" + echoed.encode() + b"\n\n")
        return ""

    def _profile(self, body: dict[str, Any], p: ModelProfile, section: str | None = None) -> None:
        """Play a measured model behaviour, ``time_scale`` times faster than real time, drift-free."""
        scale = self.fake.time_scale
        base = _chunk_base(body)
        with self.fake.lock:  # a range in the profile: this request's draw (seeded: a bench repeats)
            first_s = (
                p.first_content_s
                if p.first_content_s_max is None
                else self.fake.rng.uniform(p.first_content_s, p.first_content_s_max)
            )
            rate = (
                p.tokens_per_s
                if p.tokens_per_s_min is None
                else self.fake.rng.uniform(p.tokens_per_s_min, p.tokens_per_s)
            )
            kind = "length" if p.length_share and self.fake.rng.random() < p.length_share else p.kind
        if kind == "length":  # the whole token budget goes to reasoning
            budget = int(body.get("max_tokens") or body.get("max_completion_tokens") or 3000)
            pieces, key, finish = ["想"] * budget, "reasoning_content", "length"
        else:
            pieces, key, finish = token_pieces(profile_text(p, _dish(body), section)), "content", "stop"
        try:
            self._open_stream(base)
            if self._keepalive_until(time.monotonic() + first_s * scale, every_s=5 * scale):
                return
            due_at = token_schedule(self.fake, p, len(pieces), scale / rate, start=time.monotonic())
            for i, piece in enumerate(pieces):
                delay = due_at(i) - time.monotonic()
                if delay > 0 and self.fake.wait(delay):
                    return
                self._event({**base, "choices": [{"index": 0, "delta": {key: piece}, "finish_reason": None}]})
            self._close_stream(base, finish, len(pieces), body=body)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self._hung_up(body)
            self.close_connection = True

    def _keepalive_until(self, end: float, every_s: float) -> bool:
        """SSE comments (a gateway's queue notices) until ``end``; True if the server stopped."""
        while (left := end - time.monotonic()) > 0:
            if self.fake.wait(min(left, every_s)):
                return True
            self._chunk(b": PROCESSING\n\n")
        return False

    def _stall(self, b: ChatBehaviour, body: dict[str, Any]) -> bool:
        end = time.monotonic() + b.stall_s
        while (left := end - time.monotonic()) > 0:
            step = min(left, b.keepalive_every_s or left)
            if self._silent(step, body):
                return True
            if b.keepalive_every_s:
                self._chunk(b": keep-alive\n\n")
        return False

    # --- images ----------------------------------------------------------------------------

    def _image(self, body: dict[str, Any], b: ImageBehaviour) -> None:
        """As OpenAI answers: ``gpt-image-*`` refuses ``response_format`` (400, the body OpenAI sends) and
        answers ``b64_json``; ``dall-e-*`` answers ``url`` unless asked for ``b64_json``; others answer what
        was asked, ``b64_json`` by default."""
        if b.delay_s and self._silent(b.delay_s, body):
            return
        if b.status != 200:
            self._json(b.status, {"error": {"message": f"fake image status {b.status}"}})
            return
        model = str(body.get("model", ""))
        if model.startswith("gpt-image-") and "response_format" in body:
            self._json(
                400,
                {
                    "error": {
                        "message": "Unknown parameter: 'response_format'.",
                        "type": "invalid_request_error",
                        "param": "response_format",
                        "code": "unknown_parameter",
                    }
                },
            )
            return
        if b.kind == "echo":
            self._json(200, {"status": "queued", "request_headers": self._headers_auth_first()})
            return
        seed = zlib.crc32(str(body.get("prompt", "")).encode()) % 256
        data = b"<html>not an image</html>" if b.kind == "garbage" else make_png(seed=seed, size_bytes=b.size_bytes)
        if b.kind == "key_in_chunks":
            data = with_key_chunks(data, self.headers.get("Authorization", "").removeprefix("Bearer "))
        wanted = body.get("response_format") or ("url" if model.startswith("dall-e-") else "b64_json")
        if b.kind == "url" or wanted == "url":
            path = f"/v1/files/image-{len(self.fake.files)}.png"
            self.fake.files[path] = data
            datum = {"url": self.fake.base_url.removesuffix("/v1") + path, "revised_prompt": body.get("prompt")}
        else:
            datum = {"b64_json": base64.b64encode(data).decode()}
        self._json(200, {"created": int(time.time()), "data": [datum]})


def token_schedule(
    fake: FakeModel, p: ModelProfile, count: int, per_token: float, *, start: float
) -> Callable[[int], float]:
    """When each token of a stream starting at ``start`` (monotonic) is due: at the stream's rate, after the
    profile's pauses (drawn now, seeded), no sooner than a capped key lets it out.

    Drift-free, as a provider's servers are: a token's time does not depend on when the thread that sends it
    wakes. A key slot taken from "now" instead lost the cap's rate to every late wake-up (eight streams each
    ~20 ms late on a busy machine sent ~400 tokens/s where the cap allows 720 at time x40), and a capped job
    overran its scaled budget."""
    scale = fake.time_scale
    with fake.lock:
        pauses = [
            fake.rng.uniform(0, p.pause_s_max) * scale if p.pause_every and i and i % p.pause_every == 0 else 0
            for i in range(count)
        ]
    offsets, paused = [], 0.0
    for i in range(count):
        paused += pauses[i]
        offsets.append(start + i * per_token + paused)
    if p.key_tokens_per_s is None:
        return offsets.__getitem__
    key_per_token = scale / p.key_tokens_per_s
    return lambda i: fake.key_slot(p.name, offsets[i], key_per_token)


class FakeModelProcess:
    """The fake model with its default behaviour, in a process of its own.

    A model provider does not share a CPU with AWS. In-process, sixty streams at once
    would share the local cloud's interpreter lock with moto and slow every AWS call;
    the CLI's local stack (``cook``, ``serve``, ``invoke``) uses this."""

    def __init__(
        self, pace_s: float, *, host: str = "127.0.0.1", port: int = 0, key_quota: KeyQuota | None = None
    ) -> None:
        self.pace_s = pace_s
        self.host = host
        self.port = port
        self.key_quota = key_quota or KeyQuota()
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        self._proc = subprocess.Popen(  # nosec B603  # sys.executable and our own module
            [
                sys.executable,
                "-m",
                "chuixiang_local.model.fake_model",
                "--pace-ms",
                str(self.pace_s * 1000),
                "--host",
                self.host,
                "--port",
                str(self.port),
                *quota_args(self.key_quota),
            ],
            # stdin: see exit_with_parent; a session of its own: Ctrl-C is the parent's to handle (serve drains
            # its jobs first, and they need the model), the parent stops this process itself.
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
            start_new_session=True,
        )
        assert self._proc.stdout is not None  # nosec B101  # type narrowing (stdout=PIPE)
        line = self._proc.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"the fake model process did not start (exit {self._proc.returncode})")
        return line

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


def quota_args(quota: KeyQuota) -> list[str]:
    """The command line that gives the fake model process ``quota``."""
    args = ["--key-minute-s", str(quota.minute_s), "--key-busy-retry-s", str(quota.busy_retry_after_s)]
    if quota.max_open is not None:
        args += ["--key-max-open", str(quota.max_open)]
    if quota.tokens_per_minute is not None:
        args += ["--key-tokens-per-minute", str(quota.tokens_per_minute)]
    return args


def main() -> None:
    """``python -m chuixiang_local.model.fake_model --pace-ms 2``: print the base URL, serve until SIGTERM."""
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--pace-ms", type=float, default=2.0)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--key-max-open", type=int, default=None, help="requests at once the key takes (429 beyond)")
    ap.add_argument("--key-tokens-per-minute", type=int, default=None, help="prompt + max_tokens, at admission")
    ap.add_argument("--key-minute-s", type=float, default=60.0, help="the minute, scaled with the pace")
    ap.add_argument("--key-busy-retry-s", type=float, default=1.0, help="Retry-After of a request refused as busy")
    args = ap.parse_args()
    quota = KeyQuota(args.key_max_open, args.key_tokens_per_minute, args.key_minute_s, args.key_busy_retry_s)
    model = FakeModel(pace_s=args.pace_ms / 1000, host=args.host, port=args.port, key_quota=quota)
    print(model.start(), flush=True)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    exit_with_parent(stopping.set)
    stopping.wait()
    model.stop()


if __name__ == "__main__":
    main()
