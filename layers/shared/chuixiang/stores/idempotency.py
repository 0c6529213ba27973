"""Idempotency keys: Powertools Idempotency's records, kept in the jobs table (``pk = <function>#<hash>``, the
same TTL attribute), so a retried ``POST`` with the same ``Idempotency-Key`` gets the same job."""

from __future__ import annotations

from functools import lru_cache

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

from ..tracing import trace_aws_calls


@lru_cache(maxsize=4)
def idempotency_store(table: str, endpoint: str | None) -> DynamoDBPersistenceLayer:
    """One persistence layer per container (and per endpoint, for local runs)."""
    return DynamoDBPersistenceLayer(
        table_name=table,
        key_attr="pk",
        expiry_attr="expiresAt",
        boto3_client=trace_aws_calls(boto3.client("dynamodb", endpoint_url=endpoint)),
    )
