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

import contextlib
import dataclasses
import io
import json
import os
import shutil
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, TextIO

import boto3
from stack_template import ACCOUNT, NO_VALUE, REGION, ConfigError, FunctionSpec, Template

from chuixiang.job_status import JobStage, JobStatus
from chuixiang.redaction import MIN_SECRET_CHARS
from chuixiang.settings import Settings
from chuixiang.stores.jobs import JobStore
from chuixiang.stores.recipe_cache import RecipeCache
from chuixiang.stores.table import job_key
from chuixiang_local.cloud import sam
from chuixiang_local.cloud.concurrency import DEFAULT_QUOTA, AccountConcurrency
from chuixiang_local.cloud.eventbridge import EventBridgeStandIn
from chuixiang_local.cloud.executions import Executions
from chuixiang_local.cloud.front_door import FrontDoorCallsFirst, FrontDoorPriority, SharedCount
from chuixiang_local.cloud.iam.gate import Principal
from chuixiang_local.cloud.iam.roles import Role, log_delivery_refused, roles
from chuixiang_local.cloud.moto_patches import (
    ROUTES,
    STATE_MACHINE_ACCESS_KEY_ID,
    STATE_MACHINE_ALIASES,
    EngineError,
    lambda_throttled,
    stopped_route,
)
from chuixiang_local.cloud.moto_server import MotoServer, RequestCounter
from chuixiang_local.cloud.vended_metrics import VendedMetrics
from chuixiang_local.workers.invoker import PASSTHROUGH, Invocation, WorkerPool, invoke, lambda_env

#: moto accepts any credentials; these are its documented dummies.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",  # nosec B105
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
}  # nosec B105
#: The api function's access key id (moto takes any): its AWS calls are the front door's.
API_ACCESS_KEY_ID = "local-api-function"  # nosec B105  # an identifier, not a secret


def seed_job(store: JobStore, event: Any) -> bool:
    """Create the job a stage event names, RUNNING, as the API and the submit stage would have (True if created)."""
    if not (isinstance(event, dict) and event.get("jobId") and isinstance(event.get("dish"), str)):
        return False
    if store.get(event["jobId"]) is not None:
        return False
    store.create(event["jobId"], event["dish"].strip())
    store.update(event["jobId"], status=JobStatus.RUNNING, stage=JobStage.RECIPE)
    return True


#: What activating a cloud's api environment replaced in this process (first activation's), put back when the
#: cloud whose environment is in place stops.
_ENV_BEFORE: dict[str, str | None] = {}


def environment_before_activation() -> dict[str, str]:
    """This process's environment as it was before an in-process cloud made it look like the api function: what
    a command started from here meanwhile is given, as from the shell (not the function's settings)."""
    env = dict(os.environ)
    for key, value in _ENV_BEFORE.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


class LocalCloud:
    """Deploys ``template.yaml`` into moto; use as a context manager."""

    def __init__(
        self,
        overrides: dict[str, str] | None = None,
        *,
        model_base_url: str,
        work_dir: Path,
        log: TextIO | None = None,
        model_api_key: str | None = None,
        worker_nice: int = 0,
        front_door_first: bool = False,
        port: int = 0,
        bind: str = "127.0.0.1",
        enforce_iam: bool = True,
        account_concurrency: int = DEFAULT_QUOTA,
        secret_key_policy: dict[str, Any] | None = None,
    ) -> None:
        """``worker_nice``: run function workers at this niceness. On AWS a function's CPU is its own;
        here sixty executions share two cores with the API and moto, and ``serve`` lowers the
        functions' priority so the front door answers first (tests keep 0: their timings are the functions').
        ``front_door_first``: hold the state machine's Lambda invocations while the API is busy, and
        serve the api function's AWS calls before the others waiting for moto
        (:mod:`chuixiang_local.cloud.front_door`; ``serve`` sets it and hands ``api_requests`` to its API process).
        ``enforce_iam``: judge every call of a function or the state machine against its role
        (:mod:`chuixiang_local.cloud.iam`); off only to show what a missing permission would do.
        ``account_concurrency``: the account's concurrent-executions quota; the state machine's invocations
        beyond it (or beyond a function's reservation) are throttled as Lambda throttles them.
        ``secret_key_policy``: encrypt the model secret with a customer-managed key that has this key policy
        (``ModelApiKeyKmsKeyArn`` set to it); every read of the secret is then judged against it, as KMS would."""
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
        #: The API's base URL where a function calls it as a client does (the synthetic job): ``serve``'s; the
        #: template's execute-api URL names nothing here.
        self.api_url: str | None = None
        self.model_api_key = model_api_key or os.environ.get("MODEL_API_KEY") or "local-dev-key"
        if len(self.model_api_key) < MIN_SECRET_CHARS:  # as the functions' init would refuse it
            raise ConfigError(
                f"the model key has {len(self.model_api_key)} characters; at least "
                f"{MIN_SECRET_CHARS} are needed to keep it out of logs and job documents"
            )
        self.invocations: list[tuple[str, Invocation]] = []
        #: Each function's published versions (name -> version -> what it runs: code and layer, snapshotted).
        self.versions: dict[str, dict[str, FunctionSpec]] = {}
        #: Each function's AWS::Lambda::Version logical id in SAM's transform of what is deployed now.
        self.version_ids: dict[str, str] = {}
        self.server = MotoServer(bind=bind, port=port, calls_first_key=API_ACCESS_KEY_ID if front_door_first else None)
        self.eventbridge: EventBridgeStandIn | None = None
        self.vended: VendedMetrics | None = None
        self.enforce_iam = enforce_iam
        self.account_concurrency = account_concurrency
        self.roles: dict[str, Role] = {}  #: each function's and the state machine's role (after SAM's transform)
        self.secret_key_policy = secret_key_policy

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> LocalCloud:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        if self.front_door_first:
            self.api_requests = SharedCount.create()
            self.front_door = FrontDoorPriority(self.api_requests.value)
        self.endpoint = self.server.start()
        self.call_priority = self.server.call_priority
        self.aws_env = {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}
        try:
            self._deploy()
        except BaseException:
            self.stop()  # a deploy AWS would refuse leaves no server or worker behind
            raise
        self.executions = Executions(self.state_machine_arn, lambda: self.client("stepfunctions"))
        reconcile = next((s for s in self.functions.values() if self._subscribes_to_sfn(s)), None)
        self.vended = VendedMetrics(self.log, self.state_machine_arn)
        self.eventbridge = EventBridgeStandIn(
            self.executions, (lambda event: self.invoke(reconcile, event)) if reconcile else None, self.log, self.vended
        )
        self.eventbridge.start()

    def stop(self) -> None:
        executions = getattr(self, "executions", None)  # none if the deployment failed early
        if self.vended is not None and executions is not None:
            with contextlib.suppress(Exception):  # the last executions' ends, counted before the cloud goes
                self.vended.observe(executions)
        if self.eventbridge is not None:
            self.eventbridge.stop()
        prefix = getattr(self, "prefix", None)  # none if the deployment failed early
        for name in list(ROUTES):
            if prefix is not None and prefix in name:
                ROUTES[name] = stopped_route  # an execution still running may yet ask for it
        if getattr(self, "pool", None) is not None:
            self.pool.close()
        if self.api_requests is not None:
            self.api_requests.close()
        self._deactivate_api_environment()
        self.server.stop()

    def _deactivate_api_environment(self) -> None:
        """Put back the environment the api function's replaced, when this cloud's is the one in place (another
        cloud activated since keeps its own until it stops)."""
        if not _ENV_BEFORE or os.environ.get("AWS_ENDPOINT_URL") != getattr(self, "endpoint", None):
            return
        for key, value in _ENV_BEFORE.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _ENV_BEFORE.clear()
        settings = sys.modules.get("chuixiang.settings")
        if settings is not None:
            settings.get_settings.cache_clear()

    @property
    def requests(self) -> RequestCounter:
        """The AWS API calls moto has served (what ``chuixiang cost`` bills)."""
        if self.server.requests is None:
            raise EngineError("the local cloud has not started")
        return self.server.requests

    def client(self, service: Any) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )  # nosec B106  # moto

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
        self._enforce_iam()
        self._start_workers()  # the zygote's imports (~1 s of CPU) overlap the rest of the deployment
        self._create_functions()
        self.concurrency = AccountConcurrency(
            self.account_concurrency,
            self._reservations(),
            outside=self.api_requests.value if self.api_requests else lambda: 0,
        )
        lid, arn, definition = self.template.state_machine()
        iam = self.client("iam")
        role = iam.create_role(RoleName=f"{self.prefix}sfn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        name = physical[lid]["Name"]
        asl = json.dumps(definition)
        created = self.client("stepfunctions").create_state_machine(
            name=name,
            definition=asl,
            roleArn=role,
            type="STANDARD",
        )["stateMachineArn"]
        if created != arn:
            raise EngineError(f"state machine ARN {created} != template's {arn}")

    def _enforce_iam(self) -> None:
        """Give each function and the state machine its own access key and its role, after SAM's transform."""
        t, gate = self.template, self.server.gate
        gate.enforcing, gate.log = self.enforce_iam, self.log
        for lid, res in t.of_type("AWS::DynamoDB::Table").items():
            keys = res["Properties"]["KeySchema"]
            self.server.partition_keys[t.physical[lid]["Ref"]] = next(
                k["AttributeName"] for k in keys if k["KeyType"] == "HASH"
            )
        transformed = sam.transformed(t.root / "template.yaml", t.doc)["Resources"]
        self.version_ids = sam.version_ids(transformed)
        self.roles = roles(transformed, t)
        for spec in self.functions.values():
            role = self.roles[spec.logical_id]
            gate.register(
                self.access_key(spec), Principal(f"{self.prefix}{role.logical_id}", spec.name, role.statements)
            )
        lid, arn, _ = t.state_machine()
        role = self.roles[lid]
        refused = log_delivery_refused(role) if t.resources[lid]["Properties"].get("Logging") else []
        if refused and self.enforce_iam:
            raise ConfigError(
                f"CreateStateMachine would fail (InvalidLoggingConfiguration): the state machine's "
                f"role is not allowed {', '.join(refused)}, which logging to CloudWatch Logs needs"
            )
        gate.register(
            STATE_MACHINE_ACCESS_KEY_ID, Principal(f"{self.prefix}{role.logical_id}", "execution", role.statements)
        )
        alias = t.resources[lid]["Properties"].get("AutoPublishAlias")
        if alias:
            STATE_MACHINE_ALIASES[f"{arn}:{alias}"] = arn

    def access_key(self, spec: FunctionSpec) -> str:
        """The access key id of a function's role session (the api's is the one the front door serves first)."""
        return API_ACCESS_KEY_ID if spec.code_dir.name == "api" else f"local-{spec.logical_id}"

    def _start_workers(self) -> None:
        """The zygote imports the layer with what every function's environment shares (Globals, the
        runner's), so a worker only has its handler module left to import."""
        spec = next(iter(self.functions.values()))
        glob = self.template.doc["Globals"]["Function"]["Environment"]["Variables"]
        shared = {
            k: v
            for k, v in lambda_env(spec, self.function_env(spec)).items()
            if k in glob or k in self.function_env(spec) or k in PASSTHROUGH
        }
        self.pool = WorkerPool(
            self.log,
            env=shared,
            nice=self.worker_nice,
            code_dirs=[*self.layer_dirs(), *(s.code_dir for s in self.functions.values())],
        )

    def _create_secret(self) -> None:
        encrypted: dict[str, str] = {}
        if self.secret_key_policy is not None:
            key = self.client("kms").create_key(Policy=json.dumps(self.secret_key_policy))["KeyMetadata"]["Arn"]
            self.overrides["ModelApiKeyKmsKeyArn"] = encrypted["KmsKeyId"] = key
        self.secret_arn = self.client("secretsmanager").create_secret(
            Name=f"chuixiang/{time.time_ns()}/model-api-key", SecretString=self.model_api_key, **encrypted
        )["ARN"]

    def _create_storage(self) -> None:
        t = self.template
        ddb = self.client("dynamodb")
        for lid, res in t.of_type("AWS::DynamoDB::Table").items():
            props = t.resolve(res["Properties"])
            name = t.physical[lid]["Ref"]
            ddb.create_table(
                TableName=name,
                KeySchema=props["KeySchema"],
                AttributeDefinitions=props["AttributeDefinitions"],
                BillingMode=props.get("BillingMode", "PAY_PER_REQUEST"),
            )
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
            spec.layers = tuple(self.layer_dirs())
            lam.create_function(
                FunctionName=spec.name,
                Runtime="python3.12",
                Role=role,
                Handler=spec.handler,
                Code={"ZipFile": code.getvalue()},
                Timeout=spec.timeout_s,
                MemorySize=spec.memory_mb,
                Publish=True,
            )  # version 1
            self.versions[spec.name] = {"1": spec}
            ROUTES[spec.name] = self._route

    def _reservations(self) -> dict[str, int]:
        """Each function's reserved concurrency (``ReservedConcurrentExecutions``), by function name."""
        out = {}
        for spec in self.functions.values():
            value = self.template.resolve(
                self.template.resources[spec.logical_id]["Properties"].get(
                    "ReservedConcurrentExecutions", {"Ref": "AWS::NoValue"}
                )
            )
            if value is not NO_VALUE:
                out[spec.name] = int(value)
        return out

    def layer_dirs(self) -> list[Path]:
        t = self.template
        return [t.root / res["Properties"]["ContentUri"] for res in t.of_type("AWS::Serverless::LayerVersion").values()]

    def function_env(self, spec: FunctionSpec) -> dict[str, str]:
        """Extra environment of a local function process: moto endpoint, its role's access key, image export."""
        return {
            **self.aws_env,
            "AWS_ACCESS_KEY_ID": self.access_key(spec),
            "POWERTOOLS_METRICS_DISABLED": "false",
            "LOCAL_IMAGE_DIR": str(self.work_dir / "images"),
            **({"API_URL": self.api_url} if self.api_url else {}),
        }

    # --- invocation ----------------------------------------------------------------------

    def _route(self, name: str, body: bytes, qualifier: str | None = None) -> tuple[bytes, str | None]:
        """An invocation the state machine asked for: a published version runs the code and layer it was
        published with; ``$LATEST`` (no qualifier) runs what is deployed now."""
        spec = self.versions[name].get(qualifier or "") or next(s for s in self.functions.values() if s.name == name)
        if self.front_door is not None:
            self.front_door.wait_quiet()
        if not self.concurrency.acquire(name):
            if self.log:
                self.log.write(f"=== {spec.logical_id} throttled: the account's concurrency is used up ===\n")
            if self.vended is not None:
                self.vended.throttled(name)
            raise lambda_throttled(name)
        try:
            result = self.invoke(spec, json.loads(body or b"{}"))
        finally:
            self.concurrency.release(name)
        return json.dumps(result.payload).encode(), result.error_type

    def invoke(self, spec: FunctionSpec, event: Any) -> Invocation:
        if self.log:
            self.log.write(f"\n=== {spec.logical_id} invoked ===\n")
            self.log.flush()
        result = invoke(
            spec,
            event,
            pool=self.pool,
            layer_dirs=list(spec.layers) or self.layer_dirs(),
            extra_env=self.function_env(spec),
        )
        self.invocations.append((spec.logical_id, result))
        if self.vended is not None:
            running = max(1, self.concurrency.running.get(spec.name, 0))
            self.vended.invoked(spec.name, result.duration_ms, result.failed, running)
        if self.log and result.error_type == "Sandbox.Timedout":
            # Lambda's own line in the function's log group (text format): what an operator's filter finds.
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
            self.log.write(f"{stamp} {result.payload['errorMessage']}\n")
        if self.log:
            init = f" (cold: init {result.init_ms} ms, outside the Timeout)" if result.init_ms is not None else ""
            memory = (
                f"; max memory used {result.max_memory_mb} of {spec.memory_mb} MB"
                if result.max_memory_mb is not None
                else ""
            )
            self.log.write(
                f"=== {spec.logical_id} {'failed: ' + str(result.error_type) if result.failed else 'ok'}"
                f" in {result.duration_ms} ms{init}{memory} ===\n"
            )
            self.log.flush()
        return result

    def job_status(self, job_id: str) -> str | None:
        """The job item's ``status`` as the table holds it now, read in moto's memory (a wait polls it cheaply:
        through the API a poll costs ~9 ms of CPU); None when there is no such job."""
        from moto.dynamodb.models import dynamodb_backends
        from moto.dynamodb.models.dynamo_type import DynamoType

        table = dynamodb_backends[ACCOUNT][REGION].get_table(self.table_name)
        item = table.get_item(DynamoType({"S": job_key(job_id)["pk"]}))
        status = item.attrs.get("status") if item is not None else None
        return str(status.value) if status is not None else None

    def job_store(self) -> JobStore:
        """The layer's own JobStore over this cloud's table (for the runner and tests)."""
        table = boto3.resource(
            "dynamodb",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).Table(self.table_name)  # nosec B106  # moto
        return JobStore(Settings.model_validate({"JOBS_TABLE": self.table_name}), table)

    def recipe_cache(self) -> RecipeCache:
        """The layer's own RecipeCache over this cloud's table."""
        store = self.job_store()
        return RecipeCache(store.settings, store.table)

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

    def release(self, code: dict[str, Path]) -> dict[str, str]:
        """A deploy in the middle of jobs, as SAM and CloudFormation do it. ``code``: new directories of
        functions or of the layer, by logical id. A function gets a new version exactly when SAM's transform of
        the new code gives its ``AWS::Lambda::Version`` a new logical id (with AutoPublishAliasAllProperties, a
        layer change does); the others keep theirs. The state machine gets a definition calling the current
        versions; an execution already running keeps its definition, so its later states run the versions
        (code and layer, kept here as snapshots) it started with. Returns each function's current version."""
        t = self.template
        dirs = {**self._deployed_dirs(), **code}
        after = sam.version_ids(sam.transformed(t.root / "template.yaml", t.doc, code_dirs=dirs)["Resources"])
        layers = tuple(dirs[lid] for lid in t.of_type("AWS::Serverless::LayerVersion"))
        lam = self.client("lambda")
        for lid, spec in self.functions.items():
            if after[lid] == self.version_ids[lid]:
                continue  # SAM would not publish it: the state machine keeps calling its version
            self._snapshot(spec)
            spec.code_dir, spec.layers = dirs[lid], layers
            lam.update_function_configuration(FunctionName=spec.name, Description=f"version id {after[lid]}")
            published = lam.publish_version(FunctionName=spec.name)["Version"]
            self.versions[spec.name][published] = dataclasses.replace(spec)
            t.function_versions[lid] = published
        self.version_ids = after
        _, _, definition = t.state_machine()
        asl = json.dumps(definition)
        self.client("stepfunctions").update_state_machine(stateMachineArn=self.state_machine_arn, definition=asl)
        return {lid: t.function_versions.get(lid, "1") for lid in self.functions}

    def _deployed_dirs(self) -> dict[str, Path]:
        """The directory of each function and layer deployed now, by logical id."""
        t = self.template
        layer_lids = list(t.of_type("AWS::Serverless::LayerVersion"))
        current = next(iter(self.functions.values())).layers or tuple(self.layer_dirs())
        code = {lid: spec.code_dir for lid, spec in self.functions.items()}
        return {**code, **dict(zip(layer_lids, current, strict=True))}

    def _snapshot(self, spec: FunctionSpec) -> None:
        """Copy what a function's current version runs, so the work tree may change under it."""
        version = self.template.function_versions.get(spec.logical_id, "1")
        where = self.work_dir / "versions" / spec.logical_id / version
        layers = tuple(Path(shutil.copytree(d, where / "layers" / str(i))) for i, d in enumerate(spec.layers))
        self.versions[spec.name][version] = dataclasses.replace(
            spec, code_dir=Path(shutil.copytree(spec.code_dir, where / "code")), layers=layers
        )

    # --- executions (see Executions and EventBridgeStandIn) ---------------------------------

    def execution_arn(self, job_id: str) -> str:
        return self.executions.arn_of(job_id)

    def describe_execution(self, execution_arn: str) -> dict[str, Any]:
        return self.executions.describe(execution_arn)

    def running_executions(self) -> list[str]:
        return self.executions.running()

    def reconciled(self, execution_arn: str) -> bool:
        """The EventBridge stand-in has delivered this execution's end to the reconciler."""
        return self.eventbridge is not None and self.eventbridge.delivered(execution_arn)

    def _subscribes_to_sfn(self, spec: FunctionSpec) -> bool:
        events = self.template.resources[spec.logical_id]["Properties"].get("Events", {})
        return any(
            e["Type"] == "EventBridgeRule" and "aws.states" in e["Properties"]["Pattern"].get("source", [])
            for e in events.values()
        )

    # --- the API, in-process -------------------------------------------------------------

    def api_environment(self) -> dict[str, str]:
        spec = next(s for s in self.functions.values() if s.code_dir.name == "api")
        # Its own access key, as each function's role has in AWS: the local cloud tells its calls apart by it.
        return {**spec.env, **self.function_env(spec)}

    def activate_api_environment(self) -> None:
        """Make this process look like the api function (its env; the layer on sys.path) until the cloud stops:
        what it replaces is put back then (:meth:`_deactivate_api_environment`)."""
        env = self.api_environment()
        for key in env:
            _ENV_BEFORE.setdefault(key, os.environ.get(key))
        os.environ.update(env)
        for d in self.layer_dirs():
            if str(d) not in sys.path:
                sys.path.insert(0, str(d))
        from chuixiang.settings import get_settings

        get_settings.cache_clear()
