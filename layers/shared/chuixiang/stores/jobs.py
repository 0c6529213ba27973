"""Job items (``pk = JOB#<id>``): the job store. (The other concerns of the same table each have their
store: :mod:`.recipe_cache`, :mod:`.dish_claims`, :mod:`.admission`, :mod:`.idempotency`, :mod:`.job_times`;
the public document is rendered by ``job_view``.)

Terminal transitions are conditional on the job not being terminal yet, so
whichever of the state machine, the EventBridge reconciler or ``GET`` gets there
first wins and the others become no-ops.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ..clock import iso, now_utc
from ..errors import ErrorCode, clip_detail, retryable_default
from ..job_status import JobStage, JobStatus
from ..schemas import Progress, RecipeMetrics
from ..settings import Settings
from .conditional import applied, condition_failed
from .job_item import JobItem
from .table import from_dynamo, job_key, jobs_table, set_expression, to_dynamo

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table


#: When the recipe stage recorded its own measurements: no progress write applies after it.
RECIPE_ENDED = "recipeEndedAt"


#: When the job's end was counted in ``JobsEnded`` (set once: whoever sets it emits the count).
END_COUNTED = "endCountedAt"


class JobStore:
    """Job items: created by the API, moved on by the steps, failed by whoever sees the end first."""

    def __init__(self, settings: Settings, table: Table | None = None) -> None:
        self.settings = settings
        self.table = table or jobs_table(settings)

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
        expr, names, values = set_expression(fields)
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
        """SET ``progress`` (and ``partial``) only while the job is RUNNING in the recipe stage and that stage has
        not recorded its own measurements yet, so a late write can never touch a job or a stage that moved on;
        False when it no longer applies.

        ``metrics.recipe`` too, with what the stream has cost so far (its tokens, used and, until the stage
        records its own measurements, wasted): a recipe Lambda killed mid-stream records nothing itself, and
        its tokens were billed all the same."""
        fields: dict[str, Any] = {"progress": progress.model_dump()}
        if partial:
            fields["partial"] = partial
        expr, names, values = set_expression(fields)
        expr += ", #metrics.#recipe = :running_metrics"
        names.update(
            {"#status": "status", "#stage": "stage", "#metrics": "metrics", "#recipe": "recipe", "#ended": RECIPE_ENDED}
        )
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
            ConditionExpression="#status = :running AND #stage = :recipe AND attribute_not_exists(#ended)",
        )

    def set_metrics(self, job_id: str, stage: str, metrics: dict[str, Any]) -> None:
        """Record a stage's measurements (kept even when the job has ended). The recipe stage's also end its
        progress writes: ``recipeEndedAt`` makes :meth:`record_progress` refuse a write still in flight, which
        would otherwise replace these with the stream's running figures (the job is RUNNING in the recipe stage
        until the state machine moves it on; a loaded machine did land one there)."""
        ended = ", #ended = :now" if stage == JobStage.RECIPE.value else ""
        self.table.update_item(
            Key=job_key(job_id),
            UpdateExpression=f"SET #m.#s = :m{ended}",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#m": "metrics", "#s": stage, **({"#ended": RECIPE_ENDED} if ended else {})},
            ExpressionAttributeValues={":m": to_dynamo(metrics), **({":now": iso(now_utc())} if ended else {})},
        )

    def delete(self, job_id: str) -> None:
        """Drop a job that was never started (it joined another)."""
        self.table.delete_item(Key=job_key(job_id))

    def claim_end_count(self, job_id: str) -> JobItem | None:
        """The job as it is now, if this caller is the first to count its end (``JobsEnded``): one conditional
        write, so a job is counted once whoever ends it (a stage, the reconciler after a crash or a stop).
        None: it was counted already, or there is no such job."""
        try:
            answer = self.table.update_item(
                Key=job_key(job_id),
                UpdateExpression="SET #counted = :now",
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(#counted)",
                ExpressionAttributeNames={"#counted": END_COUNTED},
                ExpressionAttributeValues={":now": iso(now_utc())},
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if condition_failed(exc):
                return None
            raise
        return JobItem.model_validate(from_dynamo(answer["Attributes"]))

    def fail(self, job_id: str, code: ErrorCode, detail: str) -> bool:
        """Make a non-terminal job FAILED; a terminal one is left as it is."""
        return self.update(
            job_id,
            status=JobStatus.FAILED,
            error={"code": code.value, "detail": clip_detail(detail), "retryable": retryable_default(code)},
        )

    def get(self, job_id: str) -> dict[str, Any] | None:
        item = self.table.get_item(Key=job_key(job_id), ConsistentRead=True).get("Item")
        return from_dynamo(item) if item else None

    def owners(self, job_id: str) -> set[str] | None:
        """Who may read the job (its ``owners``; empty: whoever holds its id), in one small read of that attribute
        alone; None: no such job. The same read, whatever the job holds, for a job that exists and one that does
        not: a caller learns nothing of another caller's job from how long the answer took."""
        item = self.table.get_item(
            Key=job_key(job_id),
            ConsistentRead=True,
            ProjectionExpression="pk, #owners",
            ExpressionAttributeNames={"#owners": "owners"},
        ).get("Item")
        if item is None:
            return None
        return {str(o) for o in item.get("owners") or ()}  # type: ignore[union-attr]

    def read(self, job_id: str) -> JobItem | None:
        """The job, typed (:class:`JobItem`); None: no such job."""
        item = self.get(job_id)
        return JobItem.model_validate(item) if item is not None else None
