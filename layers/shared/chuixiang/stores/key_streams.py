"""A provider key's loans and refusals in the jobs table (the DynamoDB :class:`~..resilience.key_loans.KeyStore`),
and the lender a job's recipe stage borrows through.

One item per (endpoint, model): ``pk = KEY#<endpoint>#<model>``, its loans as a map of job id to
``{s, t, at, u}`` (streams, tokens, lent at, lease end), ``refusedAt``, ``probeAfterS``, ``probing`` and a version
``v``: a write applies only over the version it read (optimistic concurrency: a loan is never granted twice from
the same spare). A DynamoDB error lends nothing (the job is written whole) and is logged: a loan is a speed-up,
never the reason a job fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from ..observability import logger, metrics
from ..resilience.key_loans import KeyQuotas, KeyRecord, KeyStore, Loan, LoanEntry, given_back, lend, lent
from .conditional import applied

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

#: Optimistic writes tried before a loan is refused (others were borrowing at the same moment).
TRIES = 4


class DynamoKeyStore:
    def __init__(self, table: Table, endpoint: str, model: str) -> None:
        self.table = table
        self.key = {"pk": f"KEY#{endpoint.rstrip('/')}#{model}"}

    def read(self) -> KeyRecord:
        item = self.table.get_item(Key=self.key, ConsistentRead=True).get("Item") or {}
        stored: dict[str, Any] = item.get("loans") or {}  # type: ignore[assignment]
        loans = {
            str(job): LoanEntry(int(str(e["s"])), int(str(e["t"])), float(str(e["at"])), float(str(e["u"])))
            for job, e in stored.items()
        }
        refused = item.get("refusedAt")
        return KeyRecord(
            loans=loans,
            refused_at=float(str(refused)) if refused is not None else None,
            probe_after_s=float(str(item.get("probeAfterS", KeyRecord.probe_after_s))),
            probing=str(item["probing"]) if item.get("probing") else None,
            version=int(str(item.get("v", 0))),
        )

    def write(self, record: KeyRecord, read_version: int) -> bool:
        """One ``UpdateItem`` over the version read (the recipe function may read and update the table, no more)."""
        values: dict[str, Any] = {
            ":loans": {
                j: {"s": e.streams, "t": e.tokens, "at": int(e.at), "u": int(e.until)} for j, e in record.loans.items()
            },
            ":probe": int(record.probe_after_s),
            ":v": record.version,
        }
        sets = ["loans = :loans", "probeAfterS = :probe", "v = :v"]
        removes = []
        for name, value in (("refusedAt", record.refused_at), ("probing", record.probing)):
            if value is None:
                removes.append(name)
            else:
                sets.append(f"{name} = :{name}")
                values[f":{name}"] = int(value) if isinstance(value, float) else value
        if read_version:
            values[":read"] = read_version
        return applied(
            self.table.update_item,
            Key=self.key,
            UpdateExpression="SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else ""),
            ConditionExpression="v = :read" if read_version else "attribute_not_exists(pk)",
            ExpressionAttributeValues=values,
        )


@dataclass
class KeyLender:
    """One job's dealings with its key: borrow for a plan, give back (saying whether the key refused a call)."""

    store: KeyStore
    quotas: KeyQuotas
    job: str
    until: float  #: the job's deadline: its loan's lease
    clock: Callable[[], float] = time.time
    loan: Loan | None = None

    def borrow(self, streams: int, tokens: int) -> Loan:
        """Lend ``streams`` extra streams and ``tokens`` extra tokens, all or none (see :func:`lend`)."""
        for _ in range(TRIES):
            try:
                record = self.store.read()
                now = self.clock()
                loan = lend(record, self.quotas, self.job, streams, tokens, now)
                if not loan.streams:
                    return loan
                after = lent(record, self.job, loan, now, self.until)
                if self.store.write(after, record.version):
                    self.loan = loan
                    # The admission widget draws it beside the jobs in flight: the key's streams beyond them.
                    lending = sum(e.streams for e in after.live(now).values())
                    metrics.add_metric(name="KeyStreamsLent", unit=MetricUnit.Count, value=lending)
                    return loan
            except (ClientError, BotoCoreError) as exc:
                logger.warning("key loan not recorded: writing whole", extra={"error": str(exc)})
                return Loan(0, 0, "the key's loans could not be read")
        return Loan(0, 0, "other jobs were borrowing from the key at the same moment")

    def give_back(self, *, refused: bool) -> None:
        """End the loan (if any), and record a refusal the job saw (any call of the key answered 429)."""
        if self.loan is None and not refused:
            return
        for _ in range(TRIES):
            try:
                record = self.store.read()
                if self.store.write(given_back(record, self.job, self.clock(), refused=refused), record.version):
                    self.loan = None
                    return
            except (ClientError, BotoCoreError) as exc:
                logger.warning("key loan not given back: it lapses at its lease", extra={"error": str(exc)})
                return
        logger.warning("key loan not given back after retries: it lapses at its lease")
