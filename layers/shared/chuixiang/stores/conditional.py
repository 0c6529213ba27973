"""The one way this package makes a conditional DynamoDB write and learns whether it applied."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError


def condition_failed(exc: ClientError) -> bool:
    return bool(exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException")


def applied(write: Callable[..., Any], **request: Any) -> bool:
    """Run ``write(**request)`` (``put_item``, ``update_item``, ``delete_item`` with a
    ``ConditionExpression``): False when the condition did not hold; any other error raises."""
    try:
        write(**request)
    except ClientError as exc:
        if condition_failed(exc):
            return False
        raise
    return True
