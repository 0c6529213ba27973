"""The local cloud: moto in server mode running the template's resources and the real ASL.

* DynamoDB, S3, Secrets Manager and Step Functions are moto backends behind one
  ``ThreadedMotoServer`` on loopback; Lambda processes reach them through
  ``AWS_ENDPOINT_URL``.
* Step Functions executes the ASL with moto's port of the LocalStack
  interpreter (``execute_state_machine``), so TimeoutSeconds, Retry, Catch and
  the DynamoDB service integration behave as written.
* Its Lambda Task invocations are routed to :mod:`chuixiang_local.workers.invoker` by
  replacing moto's simple Lambda backend ``invoke``; each runs on a warm worker
  process of its function (init outside the Timeout, as in Lambda).
* EventBridge is played by a watcher that sends the reconcile function the
  "Step Functions Execution Status Change" event the template subscribes to.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
import zipfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import boto3

from chuixiang.job_status import JobStage, JobStatus
from chuixiang.settings import Settings
from chuixiang.stores.jobs import JobStore
from chuixiang_local.cloud.front_door import FrontDoorCallsFirst, FrontDoorPriority, SharedCount
from chuixiang_local.cloud.keep_alive import OpenConnections, keep_alive_handler
from chuixiang_local.cloud.moto_patches import (
    ROUTES,
    EngineError,
    apply_patches,
    asl_program,
    stopped_route,
    without_debug_mode,
)
from chuixiang_local.servers import stop_server
from chuixiang_local.template import ACCOUNT, REGION, FunctionSpec, Template
from chuixiang_local.workers.invoker import PASSTHROUGH, Invocation, WorkerPool, invoke, lambda_env

#: moto accepts any credentials; these are its documented dummies.
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",  # nosec B105
                    "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION}  # nosec B105
#: The api function's access key id (moto takes any): its AWS calls are the front door's.
API_ACCESS_KEY_ID = "local-api-function"  # nosec B105 - an identifier, not a secret
#: Deliveries of one execution's event before the EventBridge stand-in gives up on it (EventBridge retries
#: an event for up to 24 h; a developer's run is shorter).
WATCH_ATTEMPTS = 5
#: How often the EventBridge stand-in looks for executions that ended badly (EventBridge takes ~0.5 s too).
WATCH_INTERVAL_S = 0.5
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


def seed_job(store: JobStore, event: Any) -> bool:
    """Create the job a stage event names, RUNNING, as the API and the submit stage would have (True if created)."""
    if not (isinstance(event, dict) and event.get("jobId") and isinstance(event.get("dish"), str)):
        return False
    if store.get(event["jobId"]) is not None:
        return False
    store.create(event["jobId"], event["dish"].strip())
    store.update(event["jobId"], status=JobStatus.RUNNING, stage=JobStage.RECIPE)
    return True


class LocalCloud:
    """Deploys ``template.yaml`` into moto; use as a context manager."""

    def __init__(self, overrides: dict[str, str] | None = None, *, model_base_url: str,
                 work_dir: Path, log: TextIO | None = None, model_api_key: str | None = None,
                 worker_nice: int = 0, front_door_first: bool = False, port: int = 0,
                 bind: str = "127.0.0.1") -> None:
        """``worker_nice``: run function workers at this niceness. On AWS a function's CPU is its own;
        here sixty executions share two cores with the API and moto, and ``serve`` lowers the
        functions' priority so the front door answers first (tests keep 0: their timings are the functions').
        ``front_door_first``: hold the state machine's Lambda invocations while the API is busy, and
        serve the api function's AWS calls before the others waiting for moto
        (:mod:`chuixiang_local.cloud.front_door`; ``serve`` sets it and hands ``api_requests`` to its API process)."""
        self.overrides = dict(overrides or {})
        self.port = port  #: moto's port (0: any free one); ``chuixiang cloud`` fixes it for other tools
        self.bind = bind  #: moto's address; 0.0.0.0 lets a Docker container reach it (``chuixiang cloud``)
        self.worker_nice = worker_nice
        self.front_door_first = front_door_first
        self.front_door: FrontDoorPriority | None = None
        self.api_requests: SharedCount | None = None  #: requests open at serve's API process
        self.call_priority: FrontDoorCallsFirst | None = None  #: the api function's AWS calls first
        self.model_base_url = model_base_url
        self.work_dir = work_dir
        self.log = log
        self.model_api_key = model_api_key or os.environ.get("MODEL_API_KEY") or "local-dev-key"
        self.invocations: list[tuple[str, Invocation]] = []
        self.version = "1"  #: the published version the state machine's definition calls now
        #: Earlier versions, each function's code as it was when the next release replaced it.
        self.released: dict[str, dict[str, FunctionSpec]] = {}
        self._server: Any = None
        self._stop = threading.Event()
        self._seen: set[str] = set()
        self._reconciled: set[str] = set()

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> LocalCloud:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        apply_patches()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # The ASL interpreter logs every Fail state as an error; the job document says it better.
        logging.getLogger("moto").setLevel(logging.CRITICAL)
        if self.front_door_first:
            fd, path = tempfile.mkstemp(prefix="chuixiang-api-requests-")
            os.close(fd)
            self.api_requests = SharedCount.create(Path(path))
            self.front_door = FrontDoorPriority(self.api_requests.value)
        self._server = ThreadedMotoServer(ip_address=self.bind, port=self.port, verbose=False)
        self._server.start()
        wsgi = self._server._server  # werkzeug's server; it calls .app for every request
        without_debug_mode(wsgi.app)
        self._connections = OpenConnections()
        wsgi.RequestHandlerClass = keep_alive_handler(wsgi.RequestHandlerClass, self._connections)
        self.requests = RequestCounter(wsgi.app)
        wsgi.app = self.requests
        if self.front_door_first:
            self.call_priority = FrontDoorCallsFirst(wsgi.app, API_ACCESS_KEY_ID)
            wsgi.app = self.call_priority
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # The ASL interpreter's own boto clients find moto through MOTO_PORT (restored on stop:
        # moto's backends are process-wide, so a nested cloud must not strand an outer one).
        self._previous_port = os.environ.get("MOTO_PORT")
        os.environ["MOTO_PORT"] = str(port)
        self.aws_env = {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}
        self._deploy()
        self._watcher = threading.Thread(target=self._watch_executions, name="eventbridge", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        self._stop.set()
        if getattr(self, "_watcher", None) is not None:
            self._watcher.join(timeout=2)  # a daemon: it only has to not start a reconcile now
        prefix = getattr(self, "prefix", None)  # none if the deployment failed early
        for name in list(ROUTES):
            if prefix is not None and prefix in name:
                ROUTES[name] = stopped_route  # an execution still running may yet ask for it
        if getattr(self, "pool", None) is not None:
            self.pool.close()
        if self.api_requests is not None:
            self.api_requests.path.unlink(missing_ok=True)
        if self._server is not None:
            stop_server(self._server._server)
            self._server._thread.join()
            self._connections.close_all()
            if self._previous_port is None:
                os.environ.pop("MOTO_PORT", None)
            else:
                os.environ["MOTO_PORT"] = self._previous_port

    def client(self, service: Any) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id="testing", aws_secret_access_key="testing")  # nosec B106 - moto

    # --- deployment ----------------------------------------------------------------------

    def _deploy(self) -> None:
        probe = Template(self.overrides)  # validates overrides before anything is created
        self.prefix = f"cx{time.time_ns() % 10**10}-"
        physical = probe.default_physical(prefix=f"chuixiang-{self.prefix}")
        self._create_secret()
        self.overrides.setdefault("ModelBaseUrl", self.model_base_url)
        self.overrides["ModelApiKeySecretArn"] = self.secret_arn
        self.template = Template(self.overrides, physical=physical)
        self.state_machine_arn = self.template.state_machine()[1]  # the functions' environment names it
        self._create_storage()
        self.functions = self.template.functions()
        self._start_workers()  # the zygote's imports (~1 s of CPU) overlap the rest of the deployment
        self._create_functions()
        lid, arn, definition = self.template.state_machine()
        iam = self.client("iam")
        role = iam.create_role(RoleName=f"{self.prefix}sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        name = physical[lid]["Name"]
        asl = json.dumps(definition)
        created = self.client("stepfunctions").create_state_machine(
            name=name, definition=asl, roleArn=role, type="STANDARD",
        )["stateMachineArn"]
        asl_program(asl)  # not in the first executions' time
        if created != arn:
            raise EngineError(f"state machine ARN {created} != template's {arn}")

    def _start_workers(self) -> None:
        """The zygote imports the layer with what every function's environment shares (Globals, the
        runner's), so a worker only has its handler module left to import."""
        spec = next(iter(self.functions.values()))
        glob = self.template.doc["Globals"]["Function"]["Environment"]["Variables"]
        shared = {k: v for k, v in lambda_env(spec, self.function_env(spec)).items()
                  if k in glob or k in self.function_env(spec) or k in PASSTHROUGH}
        self.pool = WorkerPool(self.log, env=shared, nice=self.worker_nice,
                               code_dirs=[*self.layer_dirs(), *(s.code_dir for s in self.functions.values())])

    def _create_secret(self) -> None:
        sm = self.client("secretsmanager")
        self.secret_arn = sm.create_secret(Name=f"chuixiang/{time.time_ns()}/model-api-key",
                                           SecretString=self.model_api_key)["ARN"]

    def _create_storage(self) -> None:
        t = self.template
        ddb = self.client("dynamodb")
        for lid, res in t.of_type("AWS::DynamoDB::Table").items():
            props = t.resolve(res["Properties"])
            name = t.physical[lid]["Ref"]
            ddb.create_table(TableName=name, KeySchema=props["KeySchema"],
                             AttributeDefinitions=props["AttributeDefinitions"],
                             BillingMode=props.get("BillingMode", "PAY_PER_REQUEST"))
            if "TimeToLiveSpecification" in props:
                ddb.update_time_to_live(TableName=name, TimeToLiveSpecification=props["TimeToLiveSpecification"])
        s3 = self.client("s3")
        for lid in t.of_type("AWS::S3::Bucket"):
            s3.create_bucket(Bucket=t.physical[lid]["Ref"])
        self.table_name = next(t.physical[lid]["Ref"] for lid in t.of_type("AWS::DynamoDB::Table"))
        self.bucket_name = next(t.physical[lid]["Ref"] for lid in t.of_type("AWS::S3::Bucket"))

    def _create_functions(self) -> None:
        iam = self.client("iam")
        role = iam.create_role(RoleName=f"{self.prefix}lambda", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as zf:
            zf.writestr("README", "code runs from the work tree")
        lam = self.client("lambda")
        for spec in self.functions.values():
            lam.create_function(FunctionName=spec.name, Runtime="python3.12", Role=role,
                                Handler=spec.handler, Code={"ZipFile": code.getvalue()},
                                Timeout=spec.timeout_s, MemorySize=spec.memory_mb, Publish=True)  # version 1
            ROUTES[spec.name] = self._route

    def layer_dirs(self) -> list[Path]:
        t = self.template
        return [t.root / res["Properties"]["ContentUri"]
                for res in t.of_type("AWS::Serverless::LayerVersion").values()]

    def function_env(self, spec: FunctionSpec) -> dict[str, str]:
        """Extra environment of a local function process: moto endpoint, image export, and the state machine
        itself where the template names its alias (moto has no state machine aliases; the local alias would
        always point at the latest version, which is what the state machine's own ARN starts)."""
        extra = {"STATE_MACHINE_ARN": self.state_machine_arn} if "STATE_MACHINE_ARN" in spec.env else {}
        return {**self.aws_env, **extra,
                "POWERTOOLS_METRICS_DISABLED": "false",
                "LOCAL_IMAGE_DIR": str(self.work_dir / "images")}

    # --- invocation ----------------------------------------------------------------------

    def _route(self, name: str, body: bytes, qualifier: str | None = None) -> tuple[bytes, str | None]:
        """An invocation the state machine asked for: a published version runs the code it was published
        with (an earlier release's snapshot); the current version and ``$LATEST`` run the work tree."""
        older = self.released.get(qualifier or "", {})
        spec = next((s for s in older.values() if s.name == name), None) or \
            next(s for s in self.functions.values() if s.name == name)
        if self.front_door is not None:
            self.front_door.wait_quiet()
        result = self.invoke(spec, json.loads(body or b"{}"))
        return json.dumps(result.payload).encode(), result.error_type

    def invoke(self, spec: FunctionSpec, event: Any) -> Invocation:
        if self.log:
            self.log.write(f"\n=== {spec.logical_id} invoked ===\n")
            self.log.flush()
        result = invoke(spec, event, pool=self.pool, layer_dirs=self.layer_dirs(), extra_env=self.function_env(spec))
        self.invocations.append((spec.logical_id, result))
        if self.log:
            init = f" (cold: init {result.init_ms} ms, outside the Timeout)" if result.init_ms is not None else ""
            memory = f"; max memory used {result.max_memory_mb} of {spec.memory_mb} MB" \
                if result.max_memory_mb is not None else ""
            self.log.write(f"=== {spec.logical_id} {'failed: ' + str(result.error_type) if result.failed else 'ok'}"
                           f" in {result.duration_ms} ms{init}{memory} ===\n")
            self.log.flush()
        return result

    def job_store(self) -> JobStore:
        """The layer's own JobStore over this cloud's table (for the runner and tests)."""
        table = boto3.resource("dynamodb", endpoint_url=self.endpoint, region_name=REGION,
                               aws_access_key_id="testing",
                               aws_secret_access_key="testing").Table(self.table_name)  # nosec B106 - moto
        return JobStore(Settings.model_validate({"JOBS_TABLE": self.table_name}), table)

    def reset_breakers(self) -> None:
        """Forget every model's breaker state (tests that share one cloud start each from closed)."""
        table = self.job_store().table
        items = table.scan(ProjectionExpression="pk").get("Items", [])
        for item in items:
            if str(item["pk"]).startswith("BREAKER#"):
                table.delete_item(Key={"pk": item["pk"]})

    def seed_job_for(self, event: Any) -> None:
        """A stage event names a job the fresh local table does not have: create it RUNNING,
        as the API and the submit stage would have, so ``invoke`` works on ``events/*.json``."""
        seed_job(self.job_store(), event)


    def release(self, code: dict[str, Path]) -> str:
        """A deploy in the middle of jobs, as AutoPublishAlias does it: the functions named get new code,
        every function a new version, and the state machine a definition calling those versions. An
        execution already running keeps the definition it started with, so its later states run the code
        of the version it called (kept here as a snapshot of each function's directory). The layer is the
        work tree's for every version (on AWS a version pins its layer too). Returns the new version."""
        snapshots = self.work_dir / "versions" / self.version
        self.released[self.version] = {
            lid: dataclasses.replace(spec, code_dir=Path(shutil.copytree(spec.code_dir, snapshots / lid)))
            for lid, spec in self.functions.items()}
        for lid, directory in code.items():
            self.functions[lid].code_dir = directory
        lam = self.client("lambda")
        release = str(int(self.version) + 1)
        for spec in self.functions.values():  # Lambda publishes a new version only for changed code or config
            lam.update_function_configuration(FunctionName=spec.name, Description=f"release {release}")
            published = lam.publish_version(FunctionName=spec.name)["Version"]
            if published != release:
                raise EngineError(f"{spec.name}: published version {published}, expected {release}")
        self.version = release
        self.template.function_versions = dict.fromkeys(self.functions, self.version)
        _, _, definition = self.template.state_machine()
        asl = json.dumps(definition)
        asl_program(asl)
        self.client("stepfunctions").update_state_machine(stateMachineArn=self.state_machine_arn, definition=asl)
        return self.version

    # --- EventBridge stand-in ------------------------------------------------------------

    def _watch_executions(self) -> None:
        """Deliver each execution that ended badly to the reconcile function, once it succeeds. Like
        EventBridge, any one failure (reading the executions, describing one, the invocation itself) is
        retried on the next pass, up to ``WATCH_ATTEMPTS`` times per execution, and never stops the watcher."""
        reconcile = next((s for s in self.functions.values() if self._subscribes_to_sfn(s)), None)
        attempts: dict[str, int] = {}
        while not self._stop.wait(WATCH_INTERVAL_S):
            try:
                ended = self._ended_badly()
            except Exception:  # noqa: BLE001 - the stand-in must outlive any one failure
                traceback.print_exc(file=self.log or sys.stderr)
                continue
            for arn in ended:
                if arn in self._seen or self._stop.is_set():
                    continue
                try:
                    if reconcile is not None:
                        done = self.invoke(reconcile, self.status_change_event(self.describe_execution(arn)))
                        if done.failed:
                            raise RuntimeError(f"reconcile failed: {done.payload}")
                except Exception:  # noqa: BLE001 - retried on the next pass
                    attempts[arn] = attempts.get(arn, 0) + 1
                    print(f"eventbridge: delivery {attempts[arn]} of {arn} failed", file=self.log or sys.stderr,
                          flush=True)
                    traceback.print_exc(file=self.log or sys.stderr)
                    if attempts[arn] < WATCH_ATTEMPTS:
                        continue
                self._seen.add(arn)
                self._reconciled.add(arn)

    def _ended_badly(self) -> list[str]:
        """The executions that FAILED, TIMED_OUT or were ABORTED, read from moto's backend in this
        process: EventBridge pushes these events, and polling moto's API for them twice a second
        cost the server ~5 % of a core, more with every execution it kept."""
        from moto.stepfunctions.exceptions import StateMachineDoesNotExist
        from moto.stepfunctions.responses import get_backend

        try:
            machine = get_backend(ACCOUNT, REGION).describe_state_machine(self.state_machine_arn)
        except StateMachineDoesNotExist:  # the cloud is being torn down
            return []
        ended = ("FAILED", "TIMED_OUT", "ABORTED")
        return [ex.execution_arn for ex in list(machine.executions) if ex.status in ended]

    def running_executions(self) -> list[str]:
        """The executions still RUNNING (read from moto's backend in this process, as ``_ended_badly``)."""
        from moto.stepfunctions.exceptions import StateMachineDoesNotExist
        from moto.stepfunctions.responses import get_backend

        try:
            machine = get_backend(ACCOUNT, REGION).describe_state_machine(self.state_machine_arn)
        except StateMachineDoesNotExist:
            return []
        return [ex.execution_arn for ex in list(machine.executions) if ex.status == "RUNNING"]

    def execution_arn(self, job_id: str) -> str:
        """The ARN of a job's execution (named after the job)."""
        return f"{self.state_machine_arn.replace(':stateMachine:', ':execution:')}:{job_id}"

    def describe_execution(self, execution_arn: str) -> dict[str, Any]:
        """DescribeExecution, with the status AWS would report.

        moto's interpreter ends an execution that hit the machine's TimeoutSeconds as
        FAILED with error ``States.Timeout``; AWS reports TIMED_OUT (and EventBridge
        says so), so the stand-in normalises it.
        """
        detail: dict[str, Any] = self.client("stepfunctions").describe_execution(executionArn=execution_arn)
        if detail["status"] == "FAILED" and detail.get("error") == "States.Timeout":
            detail["status"] = "TIMED_OUT"
        return detail

    def _subscribes_to_sfn(self, spec: FunctionSpec) -> bool:
        events = self.template.resources[spec.logical_id]["Properties"].get("Events", {})
        return any(e["Type"] == "EventBridgeRule" and "aws.states" in e["Properties"]["Pattern"].get("source", [])
                   for e in events.values())

    def status_change_event(self, execution: dict[str, Any]) -> dict[str, Any]:
        def ms(value: Any) -> int | None:
            return int(value.timestamp() * 1000) if value else None

        return {
            "version": "0", "id": str(time.time_ns()), "detail-type": "Step Functions Execution Status Change",
            "source": "aws.states", "account": ACCOUNT, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": REGION, "resources": [execution["executionArn"]],
            "detail": {"executionArn": execution["executionArn"], "stateMachineArn": self.state_machine_arn,
                       "name": execution["name"], "status": execution["status"],
                       "startDate": ms(execution.get("startDate")), "stopDate": ms(execution.get("stopDate")),
                       "input": execution.get("input"), "output": execution.get("output")},
        }

    def reconciled(self, execution_arn: str) -> bool:
        return execution_arn in self._reconciled

    # --- the API, in-process -------------------------------------------------------------

    def api_environment(self) -> dict[str, str]:
        spec = next(s for s in self.functions.values() if s.code_dir.name == "api")
        # Its own access key, as each function's role has in AWS: the local cloud tells its calls apart by it.
        return {**spec.env, **self.function_env(spec), "STATE_MACHINE_ARN": self.state_machine_arn,
                "AWS_ACCESS_KEY_ID": API_ACCESS_KEY_ID}

    def activate_api_environment(self) -> None:
        """Make this process look like the api function (its env; the layer on sys.path)."""
        os.environ.update(self.api_environment())
        for d in self.layer_dirs():
            if str(d) not in sys.path:
                sys.path.insert(0, str(d))
        from chuixiang.settings import get_settings

        get_settings.cache_clear()
