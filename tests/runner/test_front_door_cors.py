"""What a browser sees of every answer: the front door's own (413, 431, the drain's 503) carry the CORS headers
for an allowed origin, and every answer that echoes an origin says ``Vary: Origin``. In-process ASGI calls."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

from chuixiang.api_gate import cors_config, vary_on_origin
from chuixiang_local.gateway.api_server import LOCAL_IMAGES_PATH, local_images
from chuixiang_local.gateway.asgi import MAX_BODY_BYTES, LambdaAsgi

ALLOWED, FOREIGN = "https://app.example.cn", "https://evil.example"
CORS = cors_config(f"https://servicewechat.com,{ALLOWED}")


def _call(app: LambdaAsgi, method: str, origin: str, body: bytes = b"{}") -> tuple[int, dict[str, str]]:
    """One request through the ASGI app: its status and headers."""
    scope = {
        "type": "http",
        "method": method,
        "path": "/recipes",
        "headers": [(b"origin", origin.encode()), (b"content-type", b"application/json")],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}


def _front_door() -> LambdaAsgi:
    assert CORS is not None
    return LambdaAsgi(
        lambda event: {"statusCode": 202, "headers": {"content-type": "application/json"}, "body": "{}"},
        cors=lambda origin: CORS.to_dict(origin) if origin else {},
    )


def test_the_drains_503_and_a_too_large_body_carry_cors_for_an_allowed_origin() -> None:
    door = _front_door()
    door.draining = True
    status, headers = _call(door, "POST", ALLOWED)
    assert status == 503 and headers["access-control-allow-origin"] == ALLOWED
    assert "retry-after" in headers["access-control-expose-headers"] and headers["vary"] == "Origin"
    door.draining = False
    status, headers = _call(door, "POST", ALLOWED, b"x" * (MAX_BODY_BYTES + 1))
    assert status == 413 and headers["access-control-allow-origin"] == ALLOWED


def test_a_foreign_origin_gets_no_cors_headers_from_the_front_door() -> None:
    door = _front_door()
    door.draining = True
    status, headers = _call(door, "POST", FOREIGN)
    assert status == 503 and "access-control-allow-origin" not in headers


def test_the_functions_answers_are_left_as_they_are() -> None:
    """The function sets its own CORS headers (and Vary); the front door adds none to them."""
    door = _front_door()
    status, headers = _call(door, "POST", ALLOWED)
    assert status == 202 and "access-control-allow-origin" in headers  # added: the stub function set none
    door.invoke = lambda event: {"statusCode": 202, "headers": {"Access-Control-Allow-Origin": ALLOWED}, "body": ""}
    status, headers = _call(door, "POST", ALLOWED)
    assert list(headers).count("access-control-allow-origin") == 1


def test_an_answer_that_echoes_an_origin_varies_on_it() -> None:
    answer = vary_on_origin({"statusCode": 200, "headers": {"Access-Control-Allow-Origin": ALLOWED}})
    assert answer["headers"]["Vary"] == "Origin"
    merged = vary_on_origin({"headers": {"Access-Control-Allow-Origin": ALLOWED, "vary": "Accept-Encoding"}})
    assert merged["headers"]["Vary"] == "Accept-Encoding, Origin"
    assert vary_on_origin({"headers": {"content-type": "application/json"}}) == {
        "headers": {"content-type": "application/json"}
    }


def test_serve_hands_out_pictures_from_its_folder_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "0123456789abcdef.png").write_bytes(b"\x89PNG picture")
    (tmp_path.parent / "secret.png").write_bytes(b"not yours")
    answer = local_images(tmp_path)
    got = answer({"rawPath": f"{LOCAL_IMAGES_PATH}/0123456789abcdef.png"})
    assert got["statusCode"] == 200 and got["headers"]["content-type"] == "image/png"
    assert base64.b64decode(got["body"]) == b"\x89PNG picture"
    for path in ("../secret.png", "%2e%2e/secret.png", "0123456789abcdef.png/..", "missing0000.png"):
        refused = answer({"rawPath": f"{LOCAL_IMAGES_PATH}/{path}"})
        assert refused["statusCode"] == 404, path
        assert json.loads(refused["body"]) == {"message": "Not Found"}
