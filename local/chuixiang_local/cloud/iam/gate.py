"""The IAM gate in front of the local cloud's moto server: every signed call a function or the state
machine makes is judged against the role the template gives it, as IAM would, before moto sees it.

A caller is known by its access key id (each function's sandbox and the state machine's interpreter get
their own, as each role's session has on AWS). A key the gate does not know is the developer's own (the
runner, the tests, the CLI): it acts as the account's administrator, as a deployer does. A refusal is
answered as the service answers it (``AccessDeniedException``, or S3's ``AccessDenied``), so botocore
raises the same ``ClientError`` it raises on AWS, and it is logged with the role, action and resource.
"""

from __future__ import annotations

import html
import io
import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from .calls import AwsCall, parse_call
from .facts import Authorisation, UnknownAction, authorisation_of
from .key_policy import NEEDED, decrypt_refusal, kms_context
from .policy import Decision, Request, UnsupportedCondition, evaluate

logger = logging.getLogger("chuixiang.iam")
ACCOUNT = "123456789012"


@dataclass
class Principal:
    """A role's session: the role's name and its statements (every identity policy's, in order)."""

    role: str
    session: str  #: Lambda names a function's session after the function; Step Functions after the execution
    statements: list[dict[str, Any]] = field(default_factory=list)
    partition: str = "aws"

    @property
    def arn(self) -> str:
        """The session's ARN: what an AccessDenied message names."""
        return f"arn:{self.partition}:sts::{ACCOUNT}:assumed-role/{self.role}/{self.session}"

    @property
    def role_arn(self) -> str:
        """The role's ARN: what ``aws:PrincipalArn`` and a key policy's ``Principal`` match."""
        return f"arn:{self.partition}:iam::{ACCOUNT}:role/{self.role}"


@dataclass(frozen=True)
class Allowed:
    """A call a role's statement allowed (recorded while :attr:`IamGate.recording`): which statement is needed."""

    role: str
    action: str
    resource: str
    statement: int  #: its index in the principal's statements


@dataclass(frozen=True)
class Refusal:
    principal: Principal
    authorisation: Authorisation
    reason: str
    answer: str | None = None  #: what the service says when it is not IAM's own refusal (KMS behind a secret)

    @property
    def message(self) -> str:
        if self.answer is not None:
            return self.answer
        a = self.authorisation
        return (
            f"User: {self.principal.arn} is not authorized to perform: {a.action} on resource: "
            f"{a.resource} because {self.reason}"
        )


class IamGate:
    """WSGI middleware: ``IamGate(app)``, then :meth:`register` each role's access key."""

    def __init__(
        self, app: Callable[..., Any], *, leading_key: Callable[[str], str | None], log: TextIO | None = None
    ) -> None:
        self.app, self.leading_key, self.log = app, leading_key, log
        self.principals: dict[str, Principal] = {}
        self.refusals: list[Refusal] = []
        self.allowed: list[Allowed] = []
        self.enforcing = True
        #: ``(region, secret id)`` -> the customer-managed KMS key the secret is encrypted with and its key policy
        #: (JSON); None for the AWS-managed key, whose policy allows the account's principals via Secrets Manager
        self.secret_key: Callable[[str, str], tuple[str, str] | None] = lambda region, secret: None
        self.recording = False  #: keep every allowed call with the statement that allowed it
        self._lock = threading.Lock()

    def register(self, access_key: str, principal: Principal) -> None:
        self.principals[access_key] = principal

    # --- judging ---------------------------------------------------------------------------

    def judge(self, call: AwsCall) -> Refusal | None:
        principal = self.principals.get(call.access_key)
        if principal is None or not self.enforcing:
            return None
        try:
            authorisations = authorisation_of(
                call,
                principal_arn=principal.role_arn,
                account=ACCOUNT,
                partition=principal.partition,
                leading_key=self.leading_key,
                session=principal.session,
            )
        except UnknownAction as exc:
            return Refusal(principal, Authorisation(f"{call.service}:{call.operation}", "?"), str(exc))
        for authorisation in authorisations:
            refusal = self._judge_one(principal, authorisation)
            if refusal is not None:
                return refusal
        return self._judge_secret_key(principal, call)

    def _judge_secret_key(self, principal: Principal, call: AwsCall) -> Refusal | None:
        """A secret under a customer-managed key: Secrets Manager decrypts it with the caller's own permissions
        (``kms:ViaService`` set), and KMS judges the key policy with them (:mod:`.key_policy`)."""
        if call.service != "secretsmanager" or call.operation != "GetSecretValue":
            return None
        found = self.secret_key(call.region, str(call.params.get("SecretId")))
        if found is None:
            return None
        key, policy = found
        context = kms_context(
            region=call.region,
            partition=principal.partition,
            account=ACCOUNT,
            role_arn=principal.role_arn,
            session=principal.session,
        )
        request = Request(NEEDED, key, context)
        reason = decrypt_refusal(
            policy,
            request,
            role_arn=principal.role_arn,
            account=ACCOUNT,
            partition=principal.partition,
            identity=principal.statements,
        )
        if reason is None:
            return None
        # What Secrets Manager answers when KMS refuses the decrypt it makes for the caller.
        return Refusal(principal, Authorisation(NEEDED, key, context), reason, answer="Access to KMS is not allowed")

    def _judge_one(self, principal: Principal, authorisation: Authorisation) -> Refusal | None:
        request = Request(authorisation.action, authorisation.resource, authorisation.context)
        try:
            decision, statement = evaluate(principal.statements, request)
        except UnsupportedCondition as exc:
            return Refusal(principal, authorisation, str(exc))
        if decision is Decision.ALLOW:
            if self.recording:
                index = next(i for i, s in enumerate(principal.statements) if s is statement)
                with self._lock:
                    self.allowed.append(Allowed(principal.role, authorisation.action, authorisation.resource, index))
            return None
        reason = (
            "an explicit deny in an identity-based policy"
            if decision is Decision.EXPLICIT_DENY
            else f"no identity-based policy allows the {authorisation.action} action"
        )
        return Refusal(principal, authorisation, reason)

    def _refused(self, refusal: Refusal) -> None:
        with self._lock:
            self.refusals.append(refusal)
        a = refusal.authorisation
        logger.warning("AccessDenied: role %s, action %s, resource %s", refusal.principal.role, a.action, a.resource)
        if self.log is not None:
            self.log.write(
                f"=== IAM refused: role {refusal.principal.role} may not {a.action} on {a.resource} "
                f"({refusal.reason}) ===\n"
            )
            self.log.flush()

    # --- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        body = _read_body(environ)
        call = parse_call(environ, body)
        refusal = self.judge(call) if call is not None else None
        if refusal is None:
            answer: Iterable[bytes] = self.app(environ, start_response)
            return answer
        self._refused(refusal)
        status, headers, payload = denied_response(call, refusal.message)  # type: ignore[arg-type]
        start_response(status, headers)
        return [payload]


def _read_body(environ: dict[str, Any]) -> bytes:
    """The request body, put back for moto to read again. One without a length (chunked) is left to moto
    unread: what IAM needs of a call is in its URI, query and headers then, never in a streamed body."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if not length:
        return b""
    body: bytes = environ["wsgi.input"].read(length)
    environ["wsgi.input"] = io.BytesIO(body)
    return body


#: How each service family answers a refusal (the error shapes botocore parses for each protocol).
_JSON_SERVICES = frozenset({"dynamodb", "states", "secretsmanager", "kms", "logs", "events"})


def denied_response(call: AwsCall, message: str) -> tuple[str, list[tuple[str, str]], bytes]:
    text = html.escape(message, quote=False)
    if call.service == "s3":
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>{text}</Message></Error>'
        ).encode()
        return "403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(xml)))], xml
    if call.service in _JSON_SERVICES:
        doc = json.dumps({"__type": "AccessDeniedException", "message": message}).encode()
        return (
            "400 Bad Request",
            [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(doc)))],
            doc,
        )
    if call.service == "lambda":  # rest-json: the error type in a header
        doc = json.dumps({"Type": "User", "Message": message}).encode()
        return (
            "403 Forbidden",
            [
                ("Content-Type", "application/json"),
                ("x-amzn-ErrorType", "AccessDeniedException"),
                ("Content-Length", str(len(doc))),
            ],
            doc,
        )
    xml = (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>{text}"
        f"</Message></Error></ErrorResponse>"
    ).encode()  # the query protocol (STS, SNS, SQS…)
    return "403 Forbidden", [("Content-Type", "text/xml"), ("Content-Length", str(len(xml)))], xml
