"""An AWS API request as IAM sees it: who signed it (the access key), the service, the operation and its
parameters, read from the HTTP request the way the service's protocol lays them out (botocore's own
service models say where each parameter goes: the JSON body, the URI, the query string, a header)."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

import botocore.session

_SCOPE = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")


@dataclass(frozen=True)
class AwsCall:
    access_key: str
    region: str
    service: str  #: the signing name (``dynamodb``, ``states``, ``s3``, ``lambda``…)
    operation: str  #: the API operation (``GetItem``, ``StartExecution``, ``Invoke``…)
    params: dict[str, Any] = field(default_factory=dict)


#: Signing names whose botocore model is named otherwise.
_MODEL_NAMES = {"states": "stepfunctions"}


@functools.cache
def _model(service: str) -> Any:
    return botocore.session.get_session().get_service_model(_MODEL_NAMES.get(service, service))


@dataclass(frozen=True)
class _Route:
    method: str
    path: re.Pattern[str]
    query: dict[str, str]  #: literal query of the request URI (``?acl``)
    needs: frozenset[tuple[str, str]]  #: (location, name) of required header and query members
    op: Any

    def matches(self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str]) -> bool:
        if method != self.method or self.path.fullmatch(path) is None:
            return False
        if any(k not in query or (v and query[k][0] != v) for k, v in self.query.items()):
            return False
        return all((name.lower() in headers) if where == "header" else (name in query) for where, name in self.needs)


_NEEDED_LOCATIONS = ("header", "querystring")


@functools.cache
def _routes(service: str) -> list[_Route]:
    """Each REST operation's route, most specific first: several share one URI (PutObject, CopyObject and
    UploadPart are all ``PUT /{Bucket}/{Key+}``) and differ by what they require (``x-amz-copy-source``)."""
    routes = []
    for name in _model(service).operation_names:
        op = _model(service).operation_model(name)
        path, _, query = op.http["requestUri"].partition("?")
        regex = re.sub(
            r"\\\{(\w+)(\\\+)?\\\}", lambda m: f"(?P<{m.group(1)}>{'.+' if m.group(2) else '[^/]+'})", re.escape(path)
        )
        literal = {k: v[0] if v else "" for k, v in parse_qs(query, keep_blank_values=True).items()}
        shape = op.input_shape
        members = shape.members.items() if shape is not None else ()
        needs = frozenset(
            (s.serialization["location"], s.serialization.get("name", m))
            for m, s in members
            if m in shape.required_members and s.serialization.get("location") in _NEEDED_LOCATIONS
        )
        routes.append(_Route(op.http["method"], re.compile(regex + "/?"), literal, needs, op))
    routes.sort(key=lambda r: (-len(r.query), -len(r.needs), -len(r.path.pattern)))
    return routes


def read_routes(services: tuple[str, ...]) -> None:
    """Read the REST services' routes among these now (the others' calls name their operation in a header): a
    root that forks commands reads them once for all its forks, where a fresh process reads them at its first
    request."""
    for service in services:
        if _model(service).protocol.startswith("rest"):
            _routes(service)


def _rest_call(
    service: str, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: bytes
) -> tuple[str, dict[str, Any]] | None:
    for route in _routes(service):
        match = route.path.fullmatch(path)
        if match is not None and route.matches(method, path, query, headers):
            return route.op.name, _rest_params(route.op, match, query, headers, body)
    return None


def _rest_params(
    op: Any, match: re.Match[str], query: dict[str, list[str]], headers: dict[str, str], body: bytes
) -> dict[str, Any]:
    params: dict[str, Any] = {}
    labels = {k: unquote(v) for k, v in match.groupdict().items()}
    shape = op.input_shape
    for member, member_shape in shape.members.items() if shape is not None else ():
        location, wire = member_shape.serialization.get("location"), member_shape.serialization.get("name", member)
        if location == "uri" and wire in labels:
            params[member] = labels[wire]
        elif location == "querystring" and wire in query:
            params[member] = query[wire][0]
        elif location == "header" and wire.lower() in headers:
            params[member] = headers[wire.lower()]
    if body and op.metadata.get("protocol") == "rest-json" and not shape.serialization.get("payload"):
        with contextlib.suppress(ValueError):
            params.update(json.loads(body))
    return params


def parse_call(environ: dict[str, Any], body: bytes) -> AwsCall | None:
    """The call a signed request makes (None: not signed, e.g. a browser fetching a plain URL)."""
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    signed = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", "")) or _SCOPE.search(
        "Credential=" + query.get("X-Amz-Credential", [""])[0]
    )  # a presigned URL
    if signed is None:
        return None
    key, region, service = signed.groups()
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:  # the JSON protocols: the operation in a header, the parameters in the body
        return AwsCall(key, region, service, target.rsplit(".", 1)[-1], json.loads(body or b"{}"))
    form = (
        parse_qs(body.decode("utf-8", "replace"))
        if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded")
        else {}
    )
    if "Action" in form:  # the query protocol
        return AwsCall(key, region, service, form["Action"][0], {k: v[0] for k, v in form.items() if k != "Action"})
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    path = environ.get("PATH_INFO", "/")
    host = environ.get("HTTP_HOST", "").split(":")[0]
    if service == "s3" and host.count(".") and not re.fullmatch(r"[\d.]+", host):  # virtual-hosted style
        path = f"/{host.split('.')[0]}{path}"
    found = _rest_call(service, environ.get("REQUEST_METHOD", "GET"), path, query, headers, body)
    if found is None:
        return AwsCall(key, region, service, "", {})
    return AwsCall(key, region, service, found[0], found[1])
