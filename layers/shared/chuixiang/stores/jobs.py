"""The jobs table: job items, the recipe cache, and rendering the public job document (admission slots:
:mod:`.admission`; measured job times: :mod:`.job_times`).

One table holds both kinds of item (``pk = JOB#<id>`` and ``pk = DISH#<dish>``;
the ASL's direct DynamoDB updates spell ``JOB#`` too, and Powertools
Idempotency keeps its records here under its own keys).
Terminal transitions are conditional on the job not being terminal yet, so
whichever of the state machine, the EventBridge reconciler or ``GET`` gets there
first wins and the others become no-ops.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import boto3

from ..clock import iso, now_utc, parse_iso
from ..errors import ErrorCode, clip_detail, message_for, retryable_default
from ..job_status import JobStage, JobStatus, is_terminal
from ..models import ErrorInfo, ImageErrorInfo, ImageRef, JobDocument, JobMetrics, Progress, RecipeMetrics
from ..polling import poll_after_ms
from ..settings import Settings, aws_endpoint
from .conditional import applied

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


def _set_expression(fields: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``SET`` the given top-level fields and ``updatedAt``, with placeholder names and values."""
    fields = {**fields, "updatedAt": iso(now_utc())}
    names = {f"#f{i}": k for i, k in enumerate(fields)}
    values = {f":v{i}": to_dynamo(v) for i, v in enumerate(fields.values())}
    return "SET " + ", ".join(f"#f{i} = :v{i}" for i in range(len(fields))), names, values


def number(value: object) -> int:
    """A DynamoDB number attribute (a ``Decimal`` from boto3's resource layer) as an int."""
    return int(Decimal(str(value)))


@lru_cache(maxsize=4)
def _table(name: str, endpoint: str | None) -> Table:
    """One resource per container (creating one costs ~100 ms); keyed by endpoint for local runs."""
    return boto3.resource("dynamodb", endpoint_url=endpoint).Table(name)


class JobStore:
    def __init__(self, settings: Settings, table: Table | None = None) -> None:
        self.settings = settings
        self.table = table or _table(settings.jobs_table, aws_endpoint())

    # --- writes --------------------------------------------------------------------------

    def create(self, job_id: str, dish: str, **extra: Any) -> dict[str, Any]:
        now = now_utc()
        item: dict[str, Any] = {
            **job_key(job_id),
            "jobId": job_id,
            "dish": dish,
            "status": JobStatus.PENDING.value,
            "stage": JobStage.SUBMIT.value,
            "createdAt": iso(now),
            "updatedAt": iso(now),
            "metrics": {},
            "expiresAt": int((now + timedelta(days=self.settings.job_ttl_days)).timestamp()),
            **extra,
        }
        self.table.put_item(Item=item, ConditionExpression="attribute_not_exists(pk)")
        return item

    def add_owner(self, job_id: str, caller: str) -> None:
        """``caller`` joined the job: it may read it from now on (no ``updatedAt``: the job did not change)."""
        applied(
            self.table.update_item,
            Key=job_key(job_id),
            UpdateExpression="ADD owners :c",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":c": {caller}},
        )

    def update(self, job_id: str, only_if_active: bool = True, remove: tuple[str, ...] = (), **fields: Any) -> bool:
        """SET the given top-level fields (plus ``updatedAt``) and REMOVE ``remove``; False if the job is terminal."""
        expr, names, values = _set_expression(fields)
        if remove:
            names.update({f"#r{i}": k for i, k in enumerate(remove)})
            expr += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(remove)))
        kwargs: dict[str, Any] = {}
        if only_if_active:
            names["#status"] = "status"
            values[":succeeded"], values[":failed"] = JobStatus.SUCCEEDED.value, JobStatus.FAILED.value
            kwargs["ConditionExpression"] = "attribute_exists(pk) AND NOT #status IN (:succeeded, :failed)"
        return applied(
            self.table.update_item,
            Key=job_key(job_id),
            UpdateExpression=expr,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            **kwargs,
        )

    def record_progress(self, job_id: str, progress: Progress, partial: Mapping[str, Any] | None) -> bool:
        """SET ``progress`` (and ``partial``) only while the job is RUNNING in the recipe stage, so a
        late write can never touch a job that moved on; False when it no longer applies.

        ``metrics.recipe`` too, with what the stream has cost so far (its tokens, used and, until the stage
        records its own measurements, wasted): a recipe Lambda killed mid-stream records nothing itself, and
        its tokens were billed all the same."""
        fields: dict[str, Any] = {"progress": progress.model_dump()}
        if partial:
            fields["partial"] = partial
        expr, names, values = _set_expression(fields)
        expr += ", #metrics.#recipe = :running_metrics"
        names.update({"#status": "status", "#stage": "stage", "#metrics": "metrics", "#recipe": "recipe"})
        values.update(
            {
                ":running": JobStatus.RUNNING.value,
                ":recipe": JobStage.RECIPE.value,
                ":running_metrics": to_dynamo(
                    RecipeMetrics(
                        completionTokens=progress.tokens,
                        tokensUsed=progress.tokens,
                        tokensWasted=progress.tokens,
                        outputChars=progress.chars,
                    ).model_dump()
                ),
            }
        )
        return applied(
            self.table.update_item,
            Key=job_key(job_id),
            UpdateExpression=expr,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ConditionExpression="#status = :running AND #stage = :recipe",
        )

    def set_metrics(self, job_id: str, stage: str, metrics: dict[str, Any]) -> None:
        """Record a stage's measurements (kept even when the job has ended)."""
        self.table.update_item(
            Key=job_key(job_id),
            UpdateExpression="SET #m.#s = :m",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#m": "metrics", "#s": stage},
            ExpressionAttributeValues={":m": to_dynamo(metrics)},
        )

    def fail(self, job_id: str, code: ErrorCode, detail: str) -> bool:
        """Make a non-terminal job FAILED; a terminal one is left as it is."""
        return self.update(
            job_id,
            status=JobStatus.FAILED,
            error={"code": code.value, "detail": clip_detail(detail), "retryable": retryable_default(code)},
        )

    # --- single flight: one generation per dish at a time ----------------------------------

    def delete(self, job_id: str) -> None:
        """Drop a job that was never started (it joined another)."""
        self.table.delete_item(Key=job_key(job_id))

    def dish_leader(self, dish: str) -> str | None:
        """The job generating ``dish`` now, if its claim is live and the job has not ended."""
        holder = self._dish_holder(dish)
        return holder if holder and self._generating(holder) else None

    def _dish_holder(self, dish: str) -> str | None:
        item = self.table.get_item(Key=inflight_key(dish), ConsistentRead=True).get("Item")
        if not item or number(item.get("expiresAt", 0)) < now_utc().timestamp():
            return None
        return str(item["jobId"])

    def _generating(self, job_id: str) -> bool:
        job = self.get(job_id)
        return job is not None and not is_terminal(job.get("status")) and not past_deadline(job, 10**9)

    def claim_dish(self, dish: str, job_id: str, until: int) -> str:
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

    def unclaim_dish(self, dish: str, job_id: str) -> None:
        """Give up a claim that ``job_id`` still holds (its job will not run)."""
        applied(
            self.table.delete_item,
            Key=inflight_key(dish),
            ConditionExpression="jobId = :job",
            ExpressionAttributeValues={":job": job_id},
        )

    # --- the recipe cache ----------------------------------------------------------------

    def cached(self, dish: str) -> dict[str, Any] | None:
        """The cached recipe of ``dish``, unless it has expired (DynamoDB's TTL deletes it up to days late)."""
        item = self.table.get_item(Key=dish_key(dish), ConsistentRead=True).get("Item")
        if not item or not item.get("recipe") or number(item.get("expiresAt", 0)) <= now_utc().timestamp():
            return None
        cached: dict[str, Any] = from_dynamo(item)
        return cached

    def cache_expiry(self) -> int:
        """When an entry written now must be forgotten: a day before the bucket deletes an image drawn now
        (the lifecycle rule rounds up to the next midnight UTC)."""
        return int((now_utc() + timedelta(days=self.settings.image_retention_days - 1)).timestamp())

    def put_cache(self, dish: str, *, recipe: dict[str, Any] | None = None, image_key: str | None = None) -> None:
        """A new recipe drops the old entry's image (a new one is being drawn); a new image restarts
        the entry's life, so the entry never outlives the picture it points at."""
        fields: dict[str, Any] = {"expiresAt": self.cache_expiry()}
        if recipe is not None:
            fields["recipe"] = recipe
        if image_key is not None:
            fields["imageKey"] = image_key
        expr, names, values = _set_expression(fields)
        if recipe is not None and image_key is None:
            names["#image"] = "imageKey"
            expr += " REMOVE #image"
        self.table.update_item(
            Key=dish_key(dish), UpdateExpression=expr, ExpressionAttributeNames=names, ExpressionAttributeValues=values
        )

    # --- reads ---------------------------------------------------------------------------

    def get(self, job_id: str) -> dict[str, Any] | None:
        item = self.table.get_item(Key=job_key(job_id), ConsistentRead=True).get("Item")
        return from_dynamo(item) if item else None


def render(item: dict[str, Any], image_url: str | None) -> JobDocument:
    """The public job document (``GET /recipes/{jobId}``) from a stored item (internals dropped)."""
    error = item.get("error")
    image_error = item.get("imageError")
    key = item.get("imageKey")
    return JobDocument(
        jobId=item["jobId"],
        dish=item["dish"],
        status=item["status"],
        stage=item.get("stage", JobStage.SUBMIT),
        recipe=item.get("recipe"),
        image=ImageRef(url=image_url, key=key) if key and image_url else None,
        imageError=(
            ImageErrorInfo(code=image_error["code"], message=message_for(image_error["code"])) if image_error else None
        ),
        error=(
            ErrorInfo(
                code=error["code"],
                message=message_for(error["code"]),
                retryable=bool(error.get("retryable", retryable_default(error["code"]))),
            )
            if error
            else None
        ),
        createdAt=item["createdAt"],
        updatedAt=iso(parse_iso(item.get("updatedAt") or item["createdAt"])),
        deadlineAt=item.get("deadlineAt"),
        # A failed job shows its error, not how far it got; a written recipe supersedes the partial one.
        progress=item.get("progress") if item["status"] != JobStatus.FAILED else None,
        partial=item.get("partial") if item["status"] != JobStatus.FAILED and not item.get("recipe") else None,
        pollAfterMs=poll_after_ms(item),
        metrics=JobMetrics.model_validate(item.get("metrics") or {}),
    )


def past_deadline(item: dict[str, Any], job_timeout_s: int) -> bool:
    """A non-terminal job whose time is up: its ``deadlineAt``, or (never started) creation + timeout."""
    if is_terminal(item.get("status")):
        return False
    if item.get("deadlineAt"):
        deadline = parse_iso(item["deadlineAt"])
    else:
        deadline = parse_iso(item["createdAt"]) + timedelta(seconds=job_timeout_s)
    return now_utc() > deadline
