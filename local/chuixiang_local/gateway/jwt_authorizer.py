"""API Gateway's JWT authorizer, for ``chuixiang serve`` when ``JwtIssuer`` is set.

The deployed HTTP API checks the token before the api function runs (see
``RecipeApi`` in ``template.yaml``); locally the ASGI adapter does the same
checks, so a mini-program developer meets the same 401s here as there:

* the token is ``Authorization: Bearer <jwt>`` (a bare token is accepted too, as
  API Gateway does);
* its signing key comes from the issuer's JWKS, found through
  ``<issuer>/.well-known/openid-configuration`` (RS256/384/512, as API Gateway);
* ``iss`` must equal the issuer, ``aud`` or ``client_id`` must be one of the
  audiences, ``exp`` must be in the future and ``nbf``/``iat`` (when present) not;
* otherwise: 401 ``{"message": "Unauthorized"}`` with ``www-authenticate``, the
  answer API Gateway gives (its body, not this API's error shape).

The claims go to the function as ``requestContext.authorizer.jwt.claims``.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import jwt

#: The routes the template puts behind the authorizer (``/openapi.json`` and the local ``/swagger`` stay public).
GUARDED_PREFIX = "/recipes"
ALGORITHMS = ["RS256", "RS384", "RS512"]


class JwtAuthorizer:
    def __init__(self, issuer: str, audiences: list[str]) -> None:
        self.issuer = issuer
        self.audiences = [a for a in audiences if a]
        self._jwks: jwt.PyJWKClient | None = None
        self._lock = threading.Lock()

    def guards(self, path: str, method: str = "GET") -> bool:
        """The template's ``options`` operations carry no security: a browser's preflight has no token."""
        if method.upper() == "OPTIONS":
            return False
        return path.rstrip("/") == GUARDED_PREFIX or path.startswith(GUARDED_PREFIX + "/")

    def claims(self, headers: dict[str, str]) -> dict[str, Any] | None:
        """The token's claims, or None when API Gateway would answer 401."""
        raw = headers.get("authorization", "").strip()
        token = raw[7:].strip() if raw[:7].lower() == "bearer " else raw
        if not token:
            return None
        try:
            key = self._client().get_signing_key_from_jwt(token).key
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                issuer=self.issuer,
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except (jwt.PyJWTError, httpx.HTTPError, KeyError, ValueError):
            return None
        aud = claims.get("aud")
        offered = set(aud if isinstance(aud, list) else [aud] if aud else []) | {claims.get("client_id")}
        if not offered & set(self.audiences):
            return None
        return {k: v if isinstance(v, str) else str(v) for k, v in claims.items()}  # API Gateway passes strings

    def _client(self) -> jwt.PyJWKClient:
        with self._lock:
            if self._jwks is None:
                discovery = httpx.get(self.issuer.rstrip("/") + "/.well-known/openid-configuration", timeout=5)
                discovery.raise_for_status()
                self._jwks = jwt.PyJWKClient(discovery.json()["jwks_uri"], cache_keys=True, lifespan=300)
            return self._jwks


UNAUTHORIZED_BODY = b'{"message":"Unauthorized"}'
UNAUTHORIZED_HEADERS = {"content-type": "application/json", "www-authenticate": "Bearer"}
