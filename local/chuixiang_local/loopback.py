"""HTTP clients for this machine's own servers (the fake model, ``serve``, the tests' replay servers): plain HTTP
on loopback, many clients a run."""

from __future__ import annotations

import ssl
from typing import Any

import httpx

#: One TLS context for every such client: ``httpx.Client()`` loads certifi's bundle into a context of its own each
#: time (~24 ms of CPU a client, a bench or a test making hundreds), which plain HTTP never uses. A client that does
#: reach a TLS server verifies its certificate with this one, as httpx's own would.
_TLS = ssl.create_default_context()


def loopback_client(**options: Any) -> httpx.Client:
    """``httpx.Client(**options)`` without a TLS context of its own."""
    return httpx.Client(verify=_TLS, **options)
