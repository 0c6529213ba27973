"""The model API key and the synthetic job's token: Secrets Manager in AWS (cached by Powertools Parameters).

``MODEL_API_KEY`` in the environment wins, for runs against a real model from a
laptop; the key is never logged.
"""

from __future__ import annotations

import os

from aws_lambda_powertools.utilities import parameters

from ..settings import Settings


def model_api_key(settings: Settings) -> str | None:
    if os.environ.get("MODEL_API_KEY"):
        return os.environ["MODEL_API_KEY"]
    if not settings.model_api_key_secret_arn:
        return None
    value = parameters.get_secret(settings.model_api_key_secret_arn, max_age=300)
    return str(value) if value else None


def synthetic_token(settings: Settings) -> str | None:
    """The bearer token the synthetic job presents when the routes sit behind the JWT authorizer; an operator
    stores (and rotates) it. Read every few minutes at most, so a rotated token is used within five."""
    if not settings.synthetic_token_secret_arn:
        return None
    value = parameters.get_secret(settings.synthetic_token_secret_arn, max_age=300)
    return str(value).removeprefix("Bearer ").strip() if value else None
