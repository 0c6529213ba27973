"""The model key's reads: one Secrets Manager provider per container, its client made in the function's one boto3
session (a session of its own costs each recipe or image cold start ~40 ms of CPU more: bench/secrets_client.py),
each secret read again only after its max age."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from chuixiang.settings import get_settings
from chuixiang.stores.secrets import model_api_key, secrets_provider, synthetic_token


@pytest.fixture
def store_secret(in_process_aws: None) -> Iterator[Callable[[str, str], str]]:
    """Stores a secret (a name prefix and its value: its ARN); the settings and the provider are made afresh in
    the test, and again after it."""
    get_settings.cache_clear()
    secrets_provider.cache_clear()

    def store(prefix: str, value: str) -> str:
        made = boto3.client("secretsmanager").create_secret(Name=f"{prefix}-{uuid.uuid4()}", SecretString=value)
        return str(made["ARN"])

    yield store
    get_settings.cache_clear()
    secrets_provider.cache_clear()


def test_the_key_is_read_in_the_functions_session_once_per_max_age(
    store_secret: Callable[[str, str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = store_secret("model-key", "sk-local-0123456789abcdef")
    monkeypatch.delenv("MODEL_API_KEY", raising=False)
    monkeypatch.setenv("MODEL_API_KEY_SECRET_ARN", arn)
    sessions: list[Any] = []
    made = boto3.session.Session.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        sessions.append(self)
        made(self, *args, **kwargs)

    monkeypatch.setattr(boto3.session.Session, "__init__", counted)
    reads: list[str] = []
    secrets_provider(None).client.meta.events.register(
        "before-parameter-build.secrets-manager.GetSecretValue",
        lambda **kwargs: reads.append(kwargs["params"]["SecretId"]),
    )
    assert model_api_key(get_settings()) == "sk-local-0123456789abcdef"
    assert model_api_key(get_settings()) == "sk-local-0123456789abcdef"
    assert sessions == []  # Powertools' default provider would have made one
    assert reads == [arn]  # the second within the max age is the cached one


def test_the_synthetic_token_is_read_without_its_bearer_prefix(
    store_secret: Callable[[str, str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYNTHETIC_TOKEN_SECRET_ARN", store_secret("synthetic-token", "Bearer  tok-9 "))
    assert synthetic_token(get_settings()) == "tok-9"
