"""The model key, echoed by a model in every encoding a JSON or SSE producer can use, is stored and logged
nowhere, whole or in any piece of 8 characters: not in the job item, the recipe cache, any other item of
the table, the execution history, the function logs or the job document.

The model is a loopback server that answers with crafted streams: the key JSON-escaped (upper and lower
hex, the solidus escaped) in the recipe's text, split across SSE chunks, in every string field of a chunk
(the finish reason among them), and in error bodies of every status the reader meets."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from model_samples import recipe_for

from chuixiang.key_forms import key_pieces
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import FakeModel, ImageBehaviour

from ..support.key_encodings import KEY_FORMS
from ..support.provider_corpus import Replay, ReplayServer
from ..support.scaled import SCALED

pytestmark = pytest.mark.long_module  # 15 s or more in all: scheduled first (tests/conftest.py)

KEY = "team.key-7f3a9c2e/0b1d.A9x"  # no known key shape: only the redactor's knowledge of it hides it
ANY_FORM = key_pieces(KEY)
PIECES = [KEY[i : i + 8] for i in range(len(KEY) - 7)]
#: The key base64-encoded (at an alignment of its own: after "key=") and percent-encoded, whole.
ENCODED = [base64.b64encode(b"key=" + KEY.encode()).decode()[8:-4], quote(KEY, safe="")]


def escaped(text: str, *, upper: bool) -> str:
    """``text`` with the key's '.' and '-' as JSON \\u escapes and '/' as '\\/' (all valid JSON)."""

    def h(c: str) -> str:
        return f"\\u{ord(c):04X}" if upper else f"\\u{ord(c):04x}"

    return text.replace(KEY, KEY.replace(".", h(".")).replace("-", h("-")).replace("/", "\\/"))


def sse(docs: list[dict[str, Any]]) -> bytes:
    events = [b"data: " + json.dumps(d, ensure_ascii=False).encode() + b"\n\n" for d in docs]
    return b"".join(events) + b"data: [DONE]\n\n"


def chunks(content: str, size: int, **fields: Any) -> list[dict[str, Any]]:
    """A chat stream: ``content`` in deltas of ``size`` characters, each chunk carrying ``fields``."""
    pieces = [content[i : i + size] for i in range(0, len(content), size)]
    docs = [
        {
            "object": "chat.completion.chunk",
            **fields,
            "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}],
        }
        for p in pieces
    ]
    docs.append(
        {
            "object": "chat.completion.chunk",
            **fields,
            "choices": [{"index": 0, "delta": {}, "finish_reason": fields.get("finish", "stop")}],
        }
    )
    return docs


def recipe_with_key() -> str:
    recipe = recipe_for("番茄炒蛋")
    recipe["summary"] = f"模型把密钥 {KEY} 写进了简介"
    recipe["imagePrompt"] = f"An overhead photo of tomato and egg, key {KEY}, on a plate"
    return json.dumps(recipe, ensure_ascii=False)


def fully_escaped(text: str) -> str:
    """Every character of ``text`` as a JSON \\u escape."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


def recipe_with_encoded_key() -> str:
    recipe = recipe_for("番茄炒蛋")
    recipe["summary"] = f"密钥的 base64 是 {base64.b64encode(b'key=' + KEY.encode()).decode()}"
    recipe["imagePrompt"] = f"A photo of tomato and egg, see https://example.com/?k={quote(KEY, safe='')}"
    return json.dumps(recipe, ensure_ascii=False)


#: The forms a prober found in the stored recipe, each as the model (or a proxy rewriting its answer) wrote it.
IN_THE_RECIPE = {
    f: KEY_FORMS[f]
    for f in KEY_FORMS
    if f not in ("escaped_twice", "space_separated", "soft_hyphen_separated", "upper_cased")
}


def recipe_with(written: str) -> str:
    recipe = recipe_for("番茄炒蛋")
    recipe["summary"] = f"模型写下的是 {written} 这一串"
    return json.dumps(recipe, ensure_ascii=False)


def error_body(status: int) -> Replay:
    doc = {"error": {"message": f"bad request from key {KEY}", "type": "invalid_request_error", "code": KEY}}
    return Replay(
        escaped(json.dumps(doc), upper=status % 2 == 0).encode(),
        writes=lambda b: [b],
        content_type="application/json",
        status=status,
    )


CASES: dict[str, Replay] = {
    # The model's own JSON escapes the key: the text it streams holds "\u002e", which the SSE layer carries
    # as "\\u002e"; only decoding the recipe makes it the key again.
    "escaped_lower": Replay(sse(chunks(escaped(recipe_with_key(), upper=False), 40))),
    "escaped_upper": Replay(sse(chunks(escaped(recipe_with_key(), upper=True), 40))),
    "split_across_chunks": Replay(sse(chunks(recipe_with_key(), 3))),
    "every_field_of_a_chunk": Replay(
        escaped(
            sse(
                chunks(
                    json.dumps(recipe_for("番茄炒蛋"), ensure_ascii=False),
                    60,
                    id=KEY,
                    model=KEY,
                    system_fingerprint=KEY,
                    finish=KEY,
                )
            ).decode(),
            upper=True,
        ).encode()
    ),
    **{f"error_{status}": error_body(status) for status in (400, 401, 403, 404, 408, 429, 500, 502, 503)},
    # The whole key \u-escaped, where the reader keeps the upstream's bytes for a failure's detail (before: the
    # detail's repr doubled the backslashes and the key was stored with a backslash before each character).
    "escaped_in_an_error_event": Replay(
        f'event: error\ndata: {{"error": {{"message": "bad key {fully_escaped(KEY)}"}}}}\n\n'.encode()
    ),
    "escaped_in_undecodable_data": Replay(f'data: {{"choices": [{{"delta": "{fully_escaped(KEY)}\n\n'.encode()),
    "escaped_in_a_200_that_is_not_json": Replay(
        f"upstream says: key {fully_escaped(KEY)} is wrong".encode(),
        writes=lambda b: [b],
        content_type="application/json",
    ),
    "escaped_in_an_html_page": Replay(
        f"<html><body><p>{fully_escaped(KEY)}</p></body></html>".encode(),
        writes=lambda b: [b],
        content_type="text/html",
        status=502,
    ),
    # The key base64- and percent-encoded in the recipe the model writes (the job document shows it).
    "base64_and_percent_in_the_recipe": Replay(sse(chunks(recipe_with_encoded_key(), 40))),
    # What a prober still found stored: the key in the recipe in a form a reader could decode…
    **{
        f"{form}_in_the_recipe": Replay(sse(chunks(recipe_with(write(KEY)), 40)))
        for form, write in IN_THE_RECIPE.items()
    },
    # …escaped twice in an error body (a gateway wrapping an upstream's JSON error in its own string), in a UTF-16
    # error body, hex in one; and a finish reason escaped twice.
    "escaped_twice_in_an_error_body": Replay(
        json.dumps({"error": {"message": json.dumps({"message": f"bad key {fully_escaped(KEY)}"})}}).encode(),
        writes=lambda b: [b],
        content_type="application/json",
        status=502,
    ),
    "utf16_error_body": Replay(
        json.dumps({"error": {"message": f"bad key {KEY}"}}).encode("utf-16"),
        writes=lambda b: [b],
        content_type="application/json; charset=utf-16",
        status=400,
    ),
    "hex_in_an_error_body": Replay(
        f"upstream refused key 0x{KEY.encode().hex()}".encode(), writes=lambda b: [b], status=401
    ),
    "finish_reason_escaped_twice": Replay(
        sse(chunks(json.dumps(recipe_for("番茄炒蛋"), ensure_ascii=False), 60, finish=json.dumps(fully_escaped(KEY))))
    ),
}


class LogTail:
    """The module's one functions log, read from where the last case stopped (less an overlap that holds any line
    cut at that end): every byte is checked by some case, and no case reads all the cases before it again."""

    OVERLAP = 16_384

    def __init__(self, path: Path) -> None:
        self.path, self.read_to = path, 0

    def new_text(self) -> str:
        start = max(0, self.read_to - self.OVERLAP)
        with open(self.path, "rb") as f:
            f.seek(start)
            data = f.read()
        self.read_to = start + len(data)
        return data.decode(errors="replace")


@pytest.fixture(scope="module")
def echoing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCloud, ReplayServer, LogTail]]:
    work = tmp_path_factory.mktemp("key-encodings")
    log_path = work / "functions.log"
    with (
        ReplayServer(Replay(b"")) as server,
        open(log_path, "w") as log,
        LocalCloud(SCALED, model_base_url=server.base_url, work_dir=work, log=log, model_api_key=KEY) as cloud,
    ):
        yield cloud, server, LogTail(log_path)


@pytest.mark.parametrize("case", CASES)
def test_the_key_is_nowhere_whole_or_in_pieces(case: str, echoing: tuple[LocalCloud, ReplayServer, LogTail]) -> None:
    cloud, server, log = echoing
    server.replay = CASES[case]
    api = LocalApi(cloud)
    job_id = api.post_dish(f"回显密钥的菜{list(CASES).index(case)}")[1]["jobId"]  # a dish of at most 40 characters
    doc = api.wait(job_id, give_up_s=30)
    assert doc["status"] in ("SUCCEEDED", "FAILED"), doc
    assert server.chat_requests, "the model was asked"
    history = cloud.client("stepfunctions").get_execution_history(
        executionArn=cloud.execution_arn(job_id), maxResults=1000
    )["events"]
    items = cloud.job_store().table.scan()["Items"]
    places = {
        "job document": json.dumps(doc, ensure_ascii=False),
        "table (jobs, cache, slots…)": str(items),
        "execution history": json.dumps(history, default=str, ensure_ascii=False),
        "function logs": log.new_text(),
    }
    leaked = {where: [p for p in PIECES + ENCODED if p in text] for where, text in places.items()}
    assert not any(leaked.values()), leaked
    # And under every decoding a reader could apply (escapes to any depth, %XX, entities, NFKC, NULs and
    # zero-width characters removed, case folded; the key reversed, rot13, hex, base32, base64 of UTF-8/16).
    decodable = [where for where, text in places.items() if ANY_FORM.found_in(text)]
    assert not decodable, decodable


def test_a_picture_echoing_the_key_is_stored_as_pixels_only(tmp_path: Path) -> None:
    """The image model answers a real PNG whose ancillary chunks carry the key (an ICC profile's name, a palette's,
    a private chunk, hex in one): the picture served and stored holds none of it, under any decoding."""
    with (
        FakeModel(pace_s=0.001) as model,
        open(tmp_path / "log", "w") as log,
        LocalCloud(SCALED, model_base_url=model.base_url, work_dir=tmp_path, log=log, model_api_key=KEY) as cloud,
    ):
        model.image_script.append(ImageBehaviour(kind="key_in_chunks"))
        api = LocalApi(cloud)
        doc = api.wait(api.post_dish("回显密钥的图")[1]["jobId"], give_up_s=30)
        assert doc["status"] == "SUCCEEDED" and doc["image"], doc
        stored = Path(doc["image"]["url"]).read_bytes()
        assert stored.startswith(b"\x89PNG") and b"IDAT" in stored
        assert not [p for p in PIECES if p.encode() in stored] and KEY.encode().hex().encode()[:16] not in stored
        assert not ANY_FORM.found_in(stored.decode("latin-1"))
