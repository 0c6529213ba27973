"""Starting a job: admission, single flight per dish, StartExecution, and the Idempotency-Key replay.

What ``POST /recipes`` does once the request is valid; the HTTP module only maps these outcomes
to answers (202, 429 with ``Retry-After``, 503, 409, 422).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from botocore.exceptions import BotoCoreError, ClientError

from .clock import iso, now_utc, parse_iso
from .errors import ErrorCode
from .job_status import JobStatus
from .observability import logger
from .polling import first_poll_ms
from .schemas import CreateRecipeResponse, ExecutionInput
from .settings import aws_endpoint, get_settings
from .stores.admission import Admission, Refused
from .stores.dish_claims import DishClaims
from .stores.first_asked import FirstAsked
from .stores.idempotency import idempotency_store
from .stores.jobs import JobStore
from .timeouts import STATE_MACHINE
from .tracing import trace_aws_calls

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions.client import SFNClient


@lru_cache(maxsize=4)
def _sfn(endpoint: str | None) -> SFNClient:
    """Its StartExecution is an X-Ray subsegment when the invocation is traced."""
    return trace_aws_calls(boto3.client("stepfunctions", endpoint_url=endpoint))


class AdmissionRefused(Exception):
    """No slot for this request (``reason``: ``full``, or ``caller_limit``: the caller has its share in flight);
    the client should come back after ``retry_after_s``."""

    def __init__(self, retry_after_s: float, reason: str = "full") -> None:
        super().__init__(f"{reason}: retry after {retry_after_s:g} s")
        self.retry_after_s, self.reason = retry_after_s, reason


class JobStartError(Exception):
    """StartExecution failed; the job was marked FAILED and the caller gets a 503."""


def start_job(job: dict[str, str]) -> dict[str, Any]:
    """Start a job for the dish, or join the one generating it.

    A live job already generating the same normalised dish is joined (no second model call). Else:
    take an admission slot (none free: :class:`AdmissionRefused`), create the job item, claim the dish
    and start the execution (named after the job: one execution per job). The claim comes after
    the item, so a request that joins always finds its leader's job; one that loses the claim to a
    request a moment ahead gives its slot back, drops its item and joins that job."""
    settings = get_settings()
    store = JobStore(settings)
    claims = DishClaims(store)
    dish, caller = job["dish"], job.get("caller", "")
    leader = claims.leader(dish)
    if leader is not None:
        return _joined(store, leader, caller)
    job_id = str(uuid.uuid4())
    logger.append_keys(jobId=job_id)
    until = int((now_utc() + timedelta(seconds=STATE_MACHINE.of(settings) + 60)).timestamp())
    admission = Admission(store.table, settings.admission_jobs, settings.admission_per_caller)
    slot = admission.admit(job_id, job.get("admittedAs", caller), until)
    asked, key = FirstAsked(store.table), job.get("idempotencyKey")
    if isinstance(slot, Refused):
        if key:
            asked.refused(caller, key)
        raise AdmissionRefused(slot.retry_after_s, slot.reason)
    first = asked.admitted(caller, key) if key else None
    extra = {**({"owners": {caller}} if caller else {}), **({"askedAt": first} if first else {})}
    store.create(job_id, dish, slot=slot, **extra)
    leader = claims.claim(dish, job_id, until)
    if leader != job_id:
        admission.release(job_id, slot)
        store.delete(job_id)
        return _joined(store, leader, caller)
    try:
        started = _sfn(aws_endpoint()).start_execution(
            stateMachineArn=settings.state_machine_arn,
            name=job_id,
            input=ExecutionInput(jobId=job_id, dish=job["dish"]).model_dump_json(),
        )
    except (ClientError, BotoCoreError) as exc:
        logger.exception("StartExecution failed")
        store.fail(job_id, ErrorCode.INTERNAL, f"StartExecution failed: {exc}")
        admission.release(job_id, slot)
        claims.release(dish, job_id)
        raise JobStartError(str(exc)) from exc
    # The submit step fixes the same deadline from the execution's start (the state machine's timeout later).
    deadline_at = iso(started["startDate"] + timedelta(seconds=STATE_MACHINE.of(settings)))
    return CreateRecipeResponse(
        jobId=job_id, status=JobStatus.PENDING, pollAfterMs=first_poll_ms(settings), deadlineAt=deadline_at
    ).model_dump()


def _joined(store: JobStore, leader: str, caller: str) -> dict[str, Any]:
    """The 202 of a request that joins the job generating its dish; the job is the caller's too from now."""
    logger.info("joined the job already generating this dish", extra={"leader": leader})
    if caller:
        store.add_owner(leader, caller)
    joined, settings = store.get(leader) or {}, get_settings()
    deadline = joined.get("deadlineAt") or iso(  # not submitted yet: at the latest its timeout after creation
        parse_iso(joined.get("createdAt") or iso(now_utc())) + timedelta(seconds=STATE_MACHINE.of(settings))
    )
    return CreateRecipeResponse(
        jobId=leader,
        status=joined.get("status", JobStatus.PENDING),
        pollAfterMs=first_poll_ms(settings),
        deadlineAt=deadline,
    ).model_dump()


#: The namespaces of caller ids: no ``sub`` can equal a client's id or an address (a ``sub`` of
#: ``client:kitchen`` is ``sub:client:kitchen``, not the client ``kitchen``'s ``client:kitchen``).
CALLER_NAMESPACES = ("sub:", "client:", "ip:")


def caller_of(event: dict[str, Any]) -> str:
    """Who is calling, as far as the API can tell: the JWT's ``sub`` (``sub:<sub>``); for a token without one (a
    client-credentials token, accepted through ``client_id``), the client itself, ``client:<client_id>``:
    every request of that client shares its jobs and its Idempotency-Keys, as one caller. ``""``: no
    authorizer (a public API has no caller identity; its Idempotency-Keys are global, its jobs readable by
    whoever holds their unguessable id)."""
    context = event.get("requestContext") or {}
    claims = ((context.get("authorizer") or {}).get("jwt") or {}).get("claims") or {}
    if claims.get("sub"):
        return f"sub:{claims['sub']}"
    return f"client:{claims['client_id']}" if claims.get("client_id") else ""


def admitted_as(event: dict[str, Any]) -> str:
    """Whose share of the slots a request takes: its caller (:func:`caller_of`); without an authorizer, its
    source address (``ip:<sourceIp>``, which API Gateway sets from the connection; many users behind one
    carrier NAT share it, so a public API's per-caller cap is a cap per address)."""
    context = event.get("requestContext") or {}
    source = (context.get("http") or {}).get("sourceIp") or (context.get("identity") or {}).get("sourceIp")
    return caller_of(event) or (f"ip:{source}" if source else "")


def start_job_once(job: dict[str, str], lambda_context: Any = None) -> dict[str, Any]:
    """A retried POST with the same ``Idempotency-Key`` and dish gets the same job, for a day; the
    same key with another dish is refused (``IdempotencyValidationError``: 422), as the IETF
    Idempotency-Key draft and Stripe do.

    A double tap or a client retry after a lost answer must not start a second 90 s generation.
    """
    settings = get_settings()
    store = idempotency_store(settings.jobs_table, aws_endpoint())
    # The key is the caller's: another user's same key is another request, not theirs to replay.
    config = IdempotencyConfig(
        event_key_jmespath="[caller, idempotencyKey]",
        payload_validation_jmespath="dish",
        expires_after_seconds=24 * 3600,
    )
    if hasattr(lambda_context, "get_remaining_time_in_millis"):  # absent under `chuixiang serve`
        config.register_lambda_context(lambda_context)
    once = idempotent_function(data_keyword_argument="job", persistence_store=store, config=config)(start_job)
    result: dict[str, Any] = once(job=job)
    return result


def warm_up() -> None:
    """Create this module's AWS clients now (the api function's init phase)."""
    settings = get_settings()
    _sfn(aws_endpoint())
    idempotency_store(settings.jobs_table, aws_endpoint())


def forget_clients() -> None:
    """Build the clients again on first use (after a SnapStart restore, or when a test moves the endpoint)."""
    _sfn.cache_clear()
    idempotency_store.cache_clear()
