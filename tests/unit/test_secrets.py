"""The model key's reads: one Secrets Manager provider per container, its client made in the function's one boto3
session (a session of its own costs each recipe or image cold start ~37 ms of CPU more: bench/secrets_client.py),
each secret read again only after its max age."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
import pytest

from chuixiang.settings import get_settings
from chuixiang.stores.secrets import model_api_key, secrets_provider, synthetic_token


def test_the_key_is_read_in_the_functions_session_once_per_max_age(
    in_process_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = boto3.client("secretsmanager").create_secret(
        Name=f"model-key-{uuid.uuid4()}", SecretString="sk-local-0123456789abcdef"
    )["ARN"]
    monkeypatch.delenv("MODEL_API_KEY", raising=False)
    monkeypatch.setenv("MODEL_API_KEY_SECRET_ARN", arn)
    get_settings.cache_clear()
    secrets_provider.cache_clear()
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
    try:
        assert model_api_key(get_settings()) == "sk-local-0123456789abcdef"
        assert model_api_key(get_settings()) == "sk-local-0123456789abcdef"
    finally:
        get_settings.cache_clear()
        secrets_provider.cache_clear()
    assert sessions == []  # Powertools' default provider would have made one
    assert reads == [arn]  # the second within the max age is the cached one


def test_the_synthetic_token_is_read_without_its_bearer_prefix(
    in_process_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = boto3.client("secretsmanager").create_secret(
        Name=f"synthetic-token-{uuid.uuid4()}", SecretString="Bearer  tok-9 "
    )["ARN"]
    monkeypatch.setenv("SYNTHETIC_TOKEN_SECRET_ARN", arn)
    get_settings.cache_clear()
    secrets_provider.cache_clear()
    try:
        assert synthetic_token(get_settings()) == "tok-9"
    finally:
        get_settings.cache_clear()
        secrets_provider.cache_clear()
