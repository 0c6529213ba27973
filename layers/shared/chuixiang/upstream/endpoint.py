"""Which model to call, where, and with which key."""

from __future__ import annotations

from dataclasses import dataclass

from ..redaction import register_secret


@dataclass(frozen=True)
class ModelEndpoint:
    base_url: str  #: OpenAI-compatible base URL (``…/v1``)
    model: str
    api_key: str | None = None

    def __post_init__(self) -> None:
        register_secret(self.api_key)  # whatever an upstream echoes of it is redacted from then on

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {k.replace("_", "-"): v for k, v in extra.items()}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def __repr__(self) -> str:  # never print the key
        return f"ModelEndpoint({self.base_url!r}, {self.model!r})"
