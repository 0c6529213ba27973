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


def transacted(write: Callable[..., Any], **request: Any) -> bool:
    """Run ``transact_write_items(**request)``: False when a condition in it did not hold (the transaction
    was cancelled for it, or because another transaction held one of its items); any other error raises."""
    try:
        write(**request)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
        if error.get("Code") == "TransactionCanceledException" and set(reasons) <= CANCELLED_BY_ANOTHER:
            return False
        raise
    return True


#: A transaction's items cancelled for these reasons: its conditions, or a conflict with another transaction.
CANCELLED_BY_ANOTHER = {"None", "ConditionalCheckFailed", "TransactionConflict", None}
