"""Dish claims (``pk = INFLIGHT#<dish>``): one generation per dish at a time.

A request for a dish some live job is generating joins that job instead of calling the model again. A claim
names its job and lapses at the job's deadline, or as soon as the job has ended.
"""

from __future__ import annotations

from ..clock import now_utc
from ..job_status import is_terminal, past_deadline
from .conditional import applied
from .jobs import JobStore
from .table import inflight_key, number


class DishClaims:
    def __init__(self, jobs: JobStore) -> None:
        self.jobs, self.table = jobs, jobs.table

    def leader(self, dish: str) -> str | None:
        """The job generating ``dish`` now, if its claim is live and the job has not ended."""
        holder = self._dish_holder(dish)
        return holder if holder and self._generating(holder) else None

    def _dish_holder(self, dish: str) -> str | None:
        item = self.table.get_item(Key=inflight_key(dish), ConsistentRead=True).get("Item")
        if not item or number(item.get("expiresAt", 0)) < now_utc().timestamp():
            return None
        return str(item["jobId"])

    def _generating(self, job_id: str) -> bool:
        job = self.jobs.read(job_id)
        return (
            job is not None
            and not is_terminal(job.status)
            and not past_deadline(job.status, job.deadlineAt, job.createdAt, None)
        )

    def claim(self, dish: str, job_id: str, until: int) -> str:
        """Make ``job_id`` (its item written) the job generating ``dish``, unless another live job
        already is: then that job's id. A claim lapses at ``until`` (the job's deadline) or as soon
        as its job has ended."""
        names = {"#job": "jobId", "#exp": "expiresAt"}
        claim = {
            "Key": inflight_key(dish),
            "UpdateExpression": "SET #job = :job, #exp = :until",
            "ExpressionAttributeNames": names,
        }
        if applied(
            self.table.update_item,
            **claim,
            ConditionExpression="attribute_not_exists(pk) OR #exp < :now",
            ExpressionAttributeValues={":job": job_id, ":until": until, ":now": int(now_utc().timestamp())},
        ):
            return job_id
        holder = self._dish_holder(dish)
        if holder and self._generating(holder):
            return holder
        # Its job has ended (or its claim just lapsed): take over, unless another request just did.
        if applied(
            self.table.update_item,
            **claim,
            ConditionExpression="attribute_not_exists(pk) OR #job = :holder OR #exp < :now",
            ExpressionAttributeValues={
                ":job": job_id,
                ":until": until,
                ":holder": holder or "",
                ":now": int(now_utc().timestamp()),
            },
        ):
            return job_id
        return self._dish_holder(dish) or job_id

    def release(self, dish: str, job_id: str) -> None:
        """Give up a claim that ``job_id`` still holds (its job will not run)."""
        applied(
            self.table.delete_item,
            Key=inflight_key(dish),
            ConditionExpression="jobId = :job",
            ExpressionAttributeValues={":job": job_id},
        )
