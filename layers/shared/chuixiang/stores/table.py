"""The jobs table every store shares: its keys, its item encoding and its one client per container.

One table holds every kind of item, each under its own key prefix: jobs (``JOB#<id>``; the ASL's direct
DynamoDB updates spell ``JOB#`` too), the recipe cache (``DISH#<dish>``), dish claims (``INFLIGHT#<dish>``),
admission (``ADMISSION#…``), measured job times, breakers, model health, and Powertools Idempotency records
under their own keys. Each concern has its own store module; this one is what they have in common.
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import boto3

from ..clock import iso, now_utc
from ..settings import Settings, aws_endpoint
from ..tracing import trace_aws_calls

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table


def job_key(job_id: str) -> dict[str, str]:
    return {"pk": f"JOB#{job_id}"}


def dish_key(dish: str) -> dict[str, str]:
    return {"pk": f"DISH#{dish}"}


def inflight_key(dish: str) -> dict[str, str]:
    return {"pk": f"INFLIGHT#{dish}"}


def to_dynamo(value: Any) -> Any:
    """Plain JSON -> what the DynamoDB resource accepts (floats become Decimal)."""
    return json.loads(json.dumps(value), parse_float=Decimal)


def from_dynamo(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: from_dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_dynamo(v) for v in value]
    return value


def set_expression(fields: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``SET`` the given top-level fields and ``updatedAt``, with placeholder names and values."""
    fields = {**fields, "updatedAt": iso(now_utc())}
    names = {f"#f{i}": k for i, k in enumerate(fields)}
    values = {f":v{i}": to_dynamo(v) for i, v in enumerate(fields.values())}
    return "SET " + ", ".join(f"#f{i} = :v{i}" for i in range(len(fields))), names, values


def number(value: object) -> int:
    """A DynamoDB number attribute (a ``Decimal`` from boto3's resource layer) as an int."""
    return int(Decimal(str(value)))


@lru_cache(maxsize=4)
def table_named(name: str, endpoint: str | None) -> Table:
    """One resource per container (creating one costs ~100 ms); keyed by endpoint for local runs. Each of its
    calls is an X-Ray subsegment when the invocation is traced."""
    resource = boto3.resource("dynamodb", endpoint_url=endpoint)
    trace_aws_calls(resource.meta.client)
    return resource.Table(name)


def jobs_table(settings: Settings) -> Table:
    """The jobs table of ``settings``, through the container's one resource."""
    return table_named(settings.jobs_table, aws_endpoint())


def forget_clients() -> None:
    """Build the table's resource again on first use (after a SnapStart restore: the snapshot's is stale)."""
    table_named.cache_clear()
