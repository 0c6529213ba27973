"""With ``JwtIssuer`` set, ``chuixiang serve`` checks tokens as the deployed JWT authorizer does.

A real issuer on loopback serves its OpenID discovery document and JWKS; tokens are
signed with its RSA key (or forged). Only a valid token for an accepted audience
reaches the function, on both recipe routes; ``/openapi.json`` stays public.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from ..support.serve import Serve

# Waits on its scaled limits more than it computes (~2.4 s of CPU in ~5.0 s alone): the waiting lane's.
pytestmark = pytest.mark.waiting

AUDIENCE = "wx-miniprogram"


class Issuer:
    """An OpenID issuer on loopback: discovery document and JWKS over real HTTP."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwks = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name
                if self.path == "/.well-known/openid-configuration":
                    body = json.dumps({"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks.json"}).encode()
                elif self.path == "/jwks.json":
                    body = jwks
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "openid-of-a-user", "iat": now, "exp": now + 600, **claims}
        return jwt.encode(
            {k: v for k, v in body.items() if v is not None}, key or self.key, algorithm="RS256", headers={"kid": "k1"}
        )


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    it = Issuer()
    yield it
    it.server.shutdown()


@pytest.fixture(scope="module")
def serve(issuer: Issuer) -> Iterator[Serve]:
    server = Serve({"JwtIssuer": issuer.url, "JwtAudience": f"other-app,{AUDIENCE}"}, fake_pace_ms=0.5)
    yield server
    server.stop()


def test_only_a_valid_token_reaches_the_recipe_routes(serve: Serve, issuer: Issuer) -> None:
    def post(headers: dict[str, str]) -> httpx.Response:
        return serve.http.post(f"{serve.base}/recipes", json={"dish": "宫保鸡丁"}, headers=headers, timeout=30)

    now = int(time.time())
    forged = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "no token": {},
        "not a JWT": {"authorization": "Bearer not-a-jwt"},
        "other audience": {"authorization": f"Bearer {issuer.token(aud='someone-else')}"},
        "expired": {"authorization": f"Bearer {issuer.token(iat=now - 900, exp=now - 300)}"},
        "no expiry": {"authorization": f"Bearer {issuer.token(exp=None)}"},
        "other issuer": {"authorization": f"Bearer {issuer.token(iss='https://evil.example')}"},
        "forged signature": {"authorization": f"Bearer {issuer.token(key=forged)}"},
        "alg none": {
            "authorization": "Bearer "
            + jwt.encode({"iss": issuer.url, "aud": AUDIENCE, "exp": now + 600}, "", algorithm="none")
        },
    }
    for case, headers in refused.items():
        answer = post(headers)
        assert answer.status_code == 401, case
        assert answer.json() == {"message": "Unauthorized"}, case  # API Gateway's own body

    good = {"authorization": f"Bearer {issuer.token()}"}
    created = post(good)
    assert created.status_code == 202, created.text
    job = created.json()["jobId"]
    assert serve.http.get(f"{serve.base}/recipes/{job}", timeout=30).status_code == 401
    polled = serve.http.get(f"{serve.base}/recipes/{job}", headers=good, timeout=30)
    assert polled.status_code == 200 and polled.json()["jobId"] == job
    # client_id stands in for aud (as Cognito access tokens carry it), and a bare token is accepted.
    bare = issuer.token(aud=None, client_id=AUDIENCE)
    assert serve.http.get(f"{serve.base}/recipes/{job}", headers={"authorization": bare}, timeout=30).status_code == 200
    assert serve.http.get(f"{serve.base}/openapi.json", timeout=30).status_code == 200  # public, as in the template
