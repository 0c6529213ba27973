"""The model API key and the synthetic job's token: Secrets Manager in AWS (cached by Powertools Parameters).

``MODEL_API_KEY`` in the environment wins, for runs against a real model from a
laptop; the key is never logged.
"""

from __future__ import annotations

import os
from functools import lru_cache

import boto3
from aws_lambda_powertools.utilities.parameters import SecretsProvider

from ..settings import Settings, aws_endpoint
from ..tracing import trace_aws_calls

#: How long a read secret is used before it is read again: a rotated key or token is in use within five minutes.
MAX_AGE_S = 300


@lru_cache(maxsize=4)
def secrets_provider(endpoint: str | None) -> SecretsProvider:
    """One provider per container, keyed by endpoint for local runs. Its client comes from the container's one
    boto3 session (the one the table's resource was made in): Powertools' default provider makes a session of
    its own, whose first client loads the SDK's data again, 65 ms of a cold start's CPU against 28 ms
    (``bench/secrets_client.py``). Its calls are traced like the others."""
    client = trace_aws_calls(boto3.client("secretsmanager", endpoint_url=endpoint))
    return SecretsProvider(boto3_client=client)


def _secret(arn: str) -> str | None:
    value = secrets_provider(aws_endpoint()).get(arn, max_age=MAX_AGE_S)
    return str(value) if value else None


def model_api_key(settings: Settings) -> str | None:
    if os.environ.get("MODEL_API_KEY"):
        return os.environ["MODEL_API_KEY"]
    if not settings.model_api_key_secret_arn:
        return None
    return _secret(settings.model_api_key_secret_arn)


def synthetic_token(settings: Settings) -> str | None:
    """The bearer token the synthetic job presents when the routes sit behind the JWT authorizer; an operator
    stores (and rotates) it. Read every few minutes at most, so a rotated token is used within five."""
    if not settings.synthetic_token_secret_arn:
        return None
    value = _secret(settings.synthetic_token_secret_arn)
    return value.removeprefix("Bearer ").strip() if value else None
