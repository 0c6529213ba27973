"""moto in server mode on loopback, as the local cloud runs it: patched, keeping connections open,
counting the API calls it serves, optionally serving the api function's calls first."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from chuixiang_local.cloud.front_door import FrontDoorCallsFirst
from chuixiang_local.cloud.iam.gate import ACCOUNT, IamGate
from chuixiang_local.cloud.keep_alive import OpenConnections, keep_alive_handler
from chuixiang_local.cloud.moto_patches import apply_patches, without_debug_mode
from chuixiang_local.servers import stop_server


class RequestCounter:
    """WSGI middleware counting the AWS API calls the local cloud serves, as ``service:Action``
    (``dynamodb:UpdateItem``, ``states:StartExecution``, ``s3:PutObject`` …): what ``chuixiang cost`` bills."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        name = api_call_name(environ)
        with self._lock:
            self.counts[name] += 1
        return self.app(environ, start_response)

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)


_S3_ACTIONS = {"PUT": "PutObject", "GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}


def api_call_name(environ: dict[str, Any]) -> str:
    """``service:Action`` of a signed AWS request: the service from the SigV4 credential scope, the
    action from ``X-Amz-Target`` (JSON protocols), the path (Lambda) or the method (S3 objects)."""
    scope = re.search(r"Credential=[^/]+/[^/]+/[^/]+/([^/]+)/", environ.get("HTTP_AUTHORIZATION", ""))
    service = scope.group(1) if scope else "unsigned"
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return f"{service}:{target.rsplit('.', 1)[-1]}"
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    if service == "lambda" and path.endswith("/invocations"):
        return "lambda:Invoke"
    if service == "s3":
        return f"s3:{_S3_ACTIONS.get(method, method)}"
    return f"{service}:{method} {path}"


def secret_key(region: str, secret_id: str) -> tuple[str, str] | None:
    """The customer-managed key a secret is encrypted with, and its key policy, as moto holds them (the gate
    judges a ``GetSecretValue`` against both, as KMS would; moto itself never checks a key policy)."""
    from moto.kms.models import kms_backends
    from moto.secretsmanager.models import secretsmanager_backends

    secret = secretsmanager_backends[ACCOUNT][region].secrets.get(secret_id)
    key_id = getattr(secret, "kms_key_id", None)
    if not key_id or key_id == "alias/aws/secretsmanager":
        return None
    key = kms_backends[ACCOUNT][region].describe_key(key_id)
    return key.arn, key.policy


class MotoServer:
    """``start()`` then ``endpoint``; ``stop()`` restores ``MOTO_PORT`` (moto's backends are process-wide,
    so a nested cloud must not strand an outer one)."""

    def __init__(self, *, bind: str, port: int, calls_first_key: str | None) -> None:
        """``calls_first_key``: the access key whose calls are served first (None: in arrival order)."""
        self.bind, self.port, self.calls_first_key = bind, port, calls_first_key
        self.requests: RequestCounter | None = None
        self.partition_keys: dict[str, str] = {}  #: table name -> its partition key (dynamodb:LeadingKeys)
        self.gate = IamGate(lambda environ, start_response: [], leading_key=self.partition_keys.get)
        self.gate.secret_key = secret_key
        self.call_priority: FrontDoorCallsFirst | None = None
        self.endpoint = ""
        self._server: Any = None
        self._connections: OpenConnections | None = None
        self._port_before: list[str | None] = []  #: MOTO_PORT before this server set it (empty: not set)

    def start(self) -> str:
        from moto.server import ThreadedMotoServer

        apply_patches()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # The ASL interpreter logs every Fail state as an error; the job document says it better.
        logging.getLogger("moto").setLevel(logging.CRITICAL)
        self._server = ThreadedMotoServer(ip_address=self.bind, port=self.port, verbose=False)
        self._server.start()
        wsgi = self._server._server  # werkzeug's server; it calls .app for every request
        without_debug_mode(wsgi.app)
        self._connections = OpenConnections()
        wsgi.RequestHandlerClass = keep_alive_handler(wsgi.RequestHandlerClass, self._connections)
        self.gate.app = wsgi.app  # IAM judges a call before moto sees it
        self.requests = RequestCounter(self.gate)
        wsgi.app = self.requests
        if self.calls_first_key:
            self.call_priority = FrontDoorCallsFirst(wsgi.app, self.calls_first_key)
            wsgi.app = self.call_priority
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # The ASL interpreter's own boto clients find moto through MOTO_PORT.
        self._port_before = [os.environ.get("MOTO_PORT")]
        os.environ["MOTO_PORT"] = str(port)
        return self.endpoint

    def stop(self) -> None:
        """Whatever ``start`` got to: Ctrl-C may have stopped it while moto's thread was making its server."""
        if self._server is None:
            return
        self._server._server_ready_event.wait()  # the thread has its server, or will in a moment: shut it
        stop_server(self._server._server)
        self._server._thread.join()
        if self._connections is not None:
            self._connections.close_all()
        for before in self._port_before:
            if before is None:
                os.environ.pop("MOTO_PORT", None)
            else:
                os.environ["MOTO_PORT"] = before
        self._port_before = []
