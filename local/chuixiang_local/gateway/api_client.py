"""Call the api function in-process with API Gateway (HTTP API v2) events, like a client would."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from stack_template import REPO_ROOT

from chuixiang.job_status import is_terminal
from chuixiang.observability import logger
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.workers.context import LocalContext


def http_event(
    method: str,
    path: str,
    body: str | None = None,
    headers: dict[str, str] | None = None,
    source_ip: str | None = None,
) -> dict[str, Any]:
    """An HTTP API v2 event, built from ``events/api-post.json`` / ``events/api-get.json`` (from
    ``source_ip``: without an authorizer, admission tells callers apart by it)."""
    name = "api-post.json" if method == "POST" else "api-get.json"
    event: dict[str, Any] = json.loads((REPO_ROOT / "events" / name).read_text())
    event["rawPath"] = path
    event["requestContext"]["http"].update(method=method, path=path)
    if source_ip:
        event["requestContext"]["http"]["sourceIp"] = source_ip
    event["body"] = body
    event["headers"].update({k.lower(): v for k, v in (headers or {}).items()})
    event["pathParameters"] = {"jobId": path.rsplit("/", 1)[-1]} if method == "GET" else {}
    return event


@contextlib.contextmanager
def _logs_to(stream: Any, level: str) -> Iterator[None]:
    """The product's logger as the api function's sandbox has it: writing to ``stream``, at the level its
    environment says (``POWERTOOLS_LOG_LEVEL``), whatever this process set it to before (a bench run in the same
    process sets it to WARNING)."""
    handler = logger.registered_handler
    was = logger.log_level
    logger.setLevel(level)
    previous = handler.setStream(stream) if isinstance(handler, logging.StreamHandler) else None
    try:
        yield
    finally:
        logger.setLevel(was)
        if previous is not None and isinstance(handler, logging.StreamHandler):
            handler.setStream(previous)


#: Without a watcher of every document, how long :meth:`LocalApi.wait` goes without asking the API (the API may
#: answer terminal before the table does: a job past its deadline).
API_POLL_S = 1.0


class LocalApi:
    """The api Lambda's handler, loaded from ``functions/api`` with the function's environment.

    One request at a time, as in one Lambda sandbox: the Powertools resolver keeps the current
    event on its class, so two threads in one process would answer each other's requests
    (``chuixiang serve`` runs each request in a process of its own)."""

    def __init__(self, cloud: LocalCloud) -> None:
        self.cloud = cloud
        cloud.activate_api_environment()
        spec = cloud.template.function_by_dir("api")
        module_name, func = spec.handler.rsplit(".", 1)
        loader_spec = importlib.util.spec_from_file_location("chuixiang_api_app", spec.code_dir / f"{module_name}.py")
        assert loader_spec and loader_spec.loader  # nosec B101  # local runner, type narrowing
        module = importlib.util.module_from_spec(loader_spec)
        with contextlib.redirect_stdout(cloud.log or sys.stderr):  # its init's output (the Release metric) too
            loader_spec.loader.exec_module(module)
        self.handler: Callable[[dict[str, Any], Any], dict[str, Any]] = getattr(module, func)
        self._one_at_a_time = threading.Lock()

    def request(
        self,
        method: str,
        path: str,
        body: str | None = None,
        headers: dict[str, str] | None = None,
        source_ip: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        resp = self.invoke(http_event(method, path, body, headers, source_ip))
        return resp["statusCode"], json.loads(resp["body"])

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        """The api function's answer to one HTTP API event, with this cloud's environment and a Lambda context."""
        if os.environ.get("AWS_ENDPOINT_URL") != self.cloud.endpoint:  # another local cloud ran since
            self.cloud.activate_api_environment()
        spec = self.cloud.template.function_by_dir("api")
        context = LocalContext(
            spec.name, spec.memory_mb, "local", int(time.time() * 1000) + spec.timeout_s * 1000, spec.arn
        )
        started = time.monotonic()
        # Its stdout (the EMF of its metrics, and its log lines: Powertools' handler holds the stdout it was
        # made with) goes where a Lambda's goes: the functions' log, not the caller's stdout (`cook --json`
        # prints the job there).
        out = self.cloud.log or sys.stderr
        level = spec.env.get("POWERTOOLS_LOG_LEVEL") or "INFO"
        with self._one_at_a_time, contextlib.redirect_stdout(out), _logs_to(out, level):
            answer = self.handler(event, context)
        if self.cloud.vended is not None:  # what API Gateway would count
            api_id = str(self.cloud.template.resolve({"Ref": "RecipeApi"}))
            self.cloud.vended.api_request(api_id, int(answer["statusCode"]), (time.monotonic() - started) * 1000)
        return answer

    def post_dish(
        self, dish: Any, idempotency_key: str | None = None, source_ip: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self.request("POST", "/recipes", json.dumps({"dish": dish}, ensure_ascii=False), headers, source_ip)

    def get(self, job_id: str) -> tuple[int, dict[str, Any]]:
        return self.request("GET", f"/recipes/{job_id}")

    def wait(
        self, job_id: str, give_up_s: float, on_doc: Callable[[dict[str, Any]], None] | None = None, poll_s: float = 0.1
    ) -> dict[str, Any]:
        """Poll until the job is terminal or the client gives up (then the last document);
        ``on_doc`` sees every polled document. Without ``on_doc`` the API is asked at least every
        ``API_POLL_S`` and as soon as the table holds a terminal status (read in memory every ``poll_s``): a poll
        through the api function costs ~9 ms of CPU, and the tests' many waits were a core's tenth each."""
        end = time.monotonic() + give_up_s
        while True:
            _, doc = self.get(job_id)
            asked = time.monotonic()
            if on_doc:
                on_doc(doc)
            if is_terminal(doc.get("status")) or time.monotonic() > end:
                return doc
            time.sleep(poll_s)
            next_ask = min(asked + API_POLL_S, end)
            while on_doc is None and time.monotonic() < next_ask and not self._ended_in_table(job_id):
                time.sleep(poll_s)

    def _ended_in_table(self, job_id: str) -> bool:
        return is_terminal(self.cloud.job_status(job_id))
