"""Every change the local cloud makes to third-party code, each in one place, each checked against drift.

The local cloud runs moto (pinned: :data:`MOTO_VERSION`) and werkzeug's server as they are, except for
the patches below: one routes moto's Lambda ``invoke`` to our worker processes, one makes DynamoDB's
item operations atomic as DynamoDB's are, the rest remove costs that serialised the server under load
(each measured where it is defined). A patch is a :class:`Patch`: what it replaces, why, and the
third-party code it was written against (``relies_on``: the replaced functions and their call sites).
``tests/runner/test_patches.py`` hashes that code and fails when it changes under a patch (a new moto or
werkzeug), and :func:`replace` refuses a target that is gone, so no patch can go silently stale: no
``setattr`` that would only add an attribute, no ``hasattr`` that would skip one.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MOTO_VERSION = "5.2.5"  #: every patch below is verified against this version (and its drift test's hashes)

#: A function's route: (name, request body, qualifier: the version or alias invoked) -> (payload, error).
ROUTES: dict[str, Callable[[str, bytes, str | None], tuple[bytes, str | None]]] = {}
_PATCH_LOCK = threading.Lock()


#: The state machine interpreter's access key id: its service integrations are judged against the state
#: machine's role (the IAM gate, :mod:`chuixiang_local.cloud.iam.gate`), as the execution role's session is on AWS.
STATE_MACHINE_ACCESS_KEY_ID = "local-state-machine"  # nosec B105  # an identifier, not a secret
#: Alias ARN -> state machine ARN (the template's ``AutoPublishAlias``): an execution started on the alias
#: runs the definition the alias points at, which in the local cloud is always the current one.
STATE_MACHINE_ALIASES: dict[str, str] = {}


def stopped_route(name: str, body: bytes, qualifier: str | None = None) -> tuple[bytes, str | None]:
    """The route of a stopped cloud's function: what Lambda answers for a deleted one."""
    return json.dumps(
        {"errorType": "ResourceNotFoundException", "errorMessage": f"{name}: the local cloud has stopped"}
    ).encode(), "Unhandled"


def _name_and_qualifier(function_name: str, qualifier: str | None) -> tuple[str, str | None]:
    """``name``, ``arn:…:function:name`` or ``arn:…:function:name:3`` (a version or alias) -> (name, qualifier)."""
    if not function_name.startswith("arn:"):
        return function_name, qualifier
    parts = function_name.split(":")
    return parts[6], parts[7] if len(parts) > 7 else qualifier


def lambda_throttled(function: str) -> Exception:
    """What Lambda's Invoke answers when the account's or the function's concurrency is used up: 429
    ``TooManyRequestsException`` (moto turns the error into that response; Step Functions names it
    ``Lambda.TooManyRequestsException``)."""
    from moto.core.exceptions import JsonRESTError

    class TooManyRequests(JsonRESTError):
        code = 429

    return TooManyRequests(
        "TooManyRequestsException",
        f"Rate Exceeded. (function {function}: concurrency limit)",
        Reason="ReservedFunctionConcurrentInvocationLimitExceeded",
    )


class EngineError(RuntimeError):
    """The local engine itself is broken (e.g. moto changed and the hook no longer works)."""


#: The third-party objects a patch replaced, as they were (for the drift test: their code, not ours).
ORIGINALS: dict[str, Any] = {}
_APPLIED: set[str] = set()


def ref_of(owner: Any, attr: str) -> str:
    """``module:Qualified.name`` of ``owner.attr`` (``owner`` a module or a class)."""
    if isinstance(owner, type):
        return f"{owner.__module__}:{owner.__qualname__}.{attr}"
    return f"{owner.__name__}:{attr}"


def replace(owner: Any, attr: str, new: Any) -> Any:
    """``owner.attr = new``, keeping the original. A target that is gone is an error: a patch written
    against code that no longer exists must fail loudly, not add an attribute nobody calls."""
    if not hasattr(owner, attr):
        raise EngineError(f"{ref_of(owner, attr)} is gone: the patch of it must be rewritten for this version")
    original = getattr(owner, attr)
    ORIGINALS.setdefault(ref_of(owner, attr), original)
    setattr(owner, attr, new)
    return original


def resolve(ref: str) -> Any:
    """The object ``module:Qualified.name`` (or a whole module) names, as it was before any patch."""
    if ref in ORIGINALS:
        return ORIGINALS[ref]
    module_name, _, qualname = ref.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in filter(None, qualname.split(".")):
        target = getattr(target, part)
    return target


def fingerprint(ref: str) -> str:
    """A short hash of the source of what ``ref`` names: it changes when that code changes."""
    source = textwrap.dedent(inspect.getsource(resolve(ref)))
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Patch:
    """One change to third-party code: what it is for, the code it was written against (each ref's
    :func:`fingerprint` at the pinned versions) and how to apply it (None: applied per server, where named)."""

    name: str
    why: str
    relies_on: dict[str, str]
    apply: Callable[[], None] | None


def _lazy_batch_package() -> None:
    """Register ``moto.batch`` without running its ``__init__``, which imports Batch's backend and, through it,
    EC2's: about 1 s of every local cloud start (measured: ``import moto.ec2.models`` 1.04-1.13 s of the ASL
    parser's 1.3-1.4 s), for a service integration the state machine never calls. The ASL parser only needs
    ``moto.batch.utils`` (an enum), which still loads from the package's path; any other attribute of the
    package (``batch_backends``, what moto's server asks for) imports its backend on first use (PEP 562), so
    nothing that uses Batch sees a difference. A process that already imported it keeps it."""
    import importlib.util
    import sys

    import moto

    if "moto.batch" in sys.modules:
        return
    spec = importlib.util.find_spec("moto.batch")
    if spec is None or spec.loader is None:
        raise EngineError("moto.batch is gone: the lazy-batch patch no longer applies")
    package = importlib.util.module_from_spec(spec)

    def backend_attribute(name: str) -> Any:
        return getattr(importlib.import_module("moto.batch.models"), name)

    vars(package)["__getattr__"] = backend_attribute  # PEP 562: a module's own __getattr__
    sys.modules["moto.batch"] = package
    moto.batch = package  # what importing it would have bound


def _route_lambda_invoke() -> None:
    """Route moto's simple-Lambda ``invoke`` to our handlers."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    def routed_invoke(
        self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: dict[str, str]
    ) -> bytes:
        name, qualifier = _name_and_qualifier(function_name, qualifier)
        route = ROUTES.get(name)
        if route is None:
            raise EngineError(f"no local route for Lambda {function_name}")
        payload, error = route(name, body if isinstance(body, bytes) else str(body or "{}").encode(), qualifier)
        if error:
            response_headers["x-amz-function-error"] = "Unhandled"
        return payload

    replace(LambdaSimpleBackend, "invoke", routed_invoke)


def _start_executions_on_aliases() -> None:
    """moto's StartExecution takes a state machine or a version ARN, not an alias ARN; the template's api
    starts executions on the alias ``live`` (the ARN its role is written for). An alias the local cloud
    registered starts the machine, whose definition is the one the alias points at; any other is refused
    as AWS refuses it."""
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    original = StepFunctionsParserBackend.start_execution

    @functools.wraps(original)
    def start_execution(self: Any, state_machine_arn: str, *args: Any, **kwargs: Any) -> Any:
        return original(self, STATE_MACHINE_ALIASES.get(state_machine_arn, state_machine_arn), *args, **kwargs)

    replace(StepFunctionsParserBackend, "start_execution", start_execution)


def _stop_executions_at_once() -> None:
    """StopExecution ends an execution at once on AWS: it is ABORTED (and EventBridge says so) while the task
    it was running may go on; nothing after that task runs. moto's interpreter only raises a flag and says
    RUNNING until the running state returns (a recipe task: its whole stream), so the reconciler heard of a
    stop only when the model had finished writing. Here the execution is ABORTED when stopped, and stays so."""
    from moto.stepfunctions.parser.api import ExecutionStatus
    from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution

    stop, reflect = Execution.stop, BaseExecutionWorkerCommunication._reflect_execution_status

    @functools.wraps(stop)
    def stop_now(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
        stop(self, stop_date, error, cause)
        self.exec_status, self.stop_date = ExecutionStatus.ABORTED, stop_date

    @functools.wraps(reflect)
    def reflect_unless_stopped(self: Any) -> None:
        if self.execution.exec_status == ExecutionStatus.ABORTED:
            return  # stopped already: its status and stop date are the stop's
        reflect(self)

    replace(Execution, "stop", stop_now)
    replace(BaseExecutionWorkerCommunication, "_reflect_execution_status", reflect_unless_stopped)


def _cache_module_list() -> None:
    """moto's server lists its own package directory (~200 ``stat`` calls) on every request, inside
    the dispatcher's global lock; under load that lock serialises the whole server. The list never
    changes while it runs."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    replace(backends, "list_of_moto_modules", lambda: modules)


def _list_handler_methods_once() -> None:
    """moto lists a response class's functions (``inspect.getmembers``) on every request to find the one its action
    names: ~3 % of a busy local cloud's server. A class's functions stay what they were (a patch replaces, never
    adds), so each class's list is made once."""
    from moto.core import responses
    from moto.core.utils import method_names_from_class

    replace(responses, "method_names_from_class", functools.cache(method_names_from_class))


def _parse_update_expressions_once() -> None:
    """moto parses an UpdateItem's expression twice a call (its handler, then its backend): ~5 % of a busy local
    cloud's server, for the product's handful of expressions. A parsed expression is only read (``find_clauses``)
    or deep-copied before anything changes it (the validator's first step), so one parse serves every call."""
    parser = resolve("moto.dynamodb.parsing.expressions:UpdateExpressionParser")  # a module mypy is told to skip
    parse = functools.lru_cache(maxsize=1024)(parser.make)
    replace(parser, "make", classmethod(lambda _cls, expression_str: parse(expression_str)))


def _build_processing_maps_once() -> None:
    """moto validates an UpdateItem's expression with eight tree walkers, each asking its ``_processing_map()`` (a new
    dict of bound methods) twice at every node of the tree: ~13 % of a backend's ``update_item``. A walker's map
    names its own methods, the same for its life (a walker serves one validation), so each walker builds it once."""
    traverser = resolve("moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser")  # a module mypy is told to skip

    def processing_map(self: Any) -> dict[type, Callable[[Any], Any]]:
        built: dict[type, Callable[[Any], Any]] | None = self.__dict__.get("_cx_processing_map")
        if built is None:
            built = self.__dict__["_cx_processing_map"] = self._processing_map()
        return built

    def nodes_to_be_processed(self: Any) -> tuple[type, ...]:
        types: tuple[type, ...] | None = self.__dict__.get("_cx_node_types")
        if types is None:
            types = self.__dict__["_cx_node_types"] = tuple(processing_map(self))
        return types

    def process(self: Any, node: Any) -> Any:
        for class_key, processor in processing_map(self).items():
            if isinstance(node, class_key):
                return processor(node)
        return None

    replace(traverser, "nodes_to_be_processed", nodes_to_be_processed)
    replace(traverser, "process", process)


def _share_interpreter_clients() -> None:
    """The ASL interpreter builds a new boto3 client for every Lambda and DynamoDB task (tens of ms of
    CPU each, loading service models); with dozens of executions at once that starves the moto
    server. Clients are thread-safe: build one per (region, service, endpoint) and share it. They sign
    with the state machine's access key, so the IAM gate judges each task against the state machine's role."""
    import boto3
    from botocore.config import Config
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_dynamodb,
    )
    from moto.stepfunctions.parser.asl.utils import boto_client

    clients: dict[tuple[Any, ...], Any] = {}
    lock = threading.Lock()
    make_client: Any = boto3.client  # the service is only known at run time

    def shared(region: str, service: str, state_credentials: Any = None) -> Any:
        port = getattr(boto_client, "moto_server_port")()  # noqa: B009 - moto does not export it
        key = (region, service, port)
        with lock:
            if key not in clients:  # as moto builds it, with a connection pool for every execution at once
                clients[key] = make_client(
                    service_name=service,
                    region_name=region,
                    endpoint_url=f"http://localhost:{port}",
                    aws_access_key_id=STATE_MACHINE_ACCESS_KEY_ID,
                    aws_secret_access_key="sk",  # nosec B106
                    config=Config(
                        parameter_validation=False,
                        retries={"total_max_attempts": 1},
                        connect_timeout=99999,
                        read_timeout=99999,
                        max_pool_connections=256,
                    ),
                )
            return clients[key]

    for module in (lambda_eval_utils, state_task_service_dynamodb):  # each imported it by name
        replace(module, "boto_client_for", shared)


#: Every item operation of moto's DynamoDB backend (each taken under one lock).
ATOMIC_DYNAMODB_OPERATIONS = (
    "get_item",
    "put_item",
    "update_item",
    "delete_item",
    "transact_write_items",
    "transact_get_items",
    "batch_write_item",
    "batch_get_item",
    "query",
    "scan",
)


def atomic_dynamodb() -> None:
    """DynamoDB applies each request to an item atomically: a conditional write's check and write are
    one step. moto's backend has no lock, so two threads' conditional writes can both pass their check
    (two probes of one breaker, two owners of one admission slot). One lock around every item
    operation restores DynamoDB's guarantee; it costs nothing the interpreter lock was not costing."""
    from moto.dynamodb.models import DynamoDBBackend

    with _PATCH_LOCK:
        if "atomic_dynamodb" in _APPLIED:  # the tests' in-process table applies it too
            return
        _APPLIED.add("atomic_dynamodb")
    lock = threading.RLock()

    def locked(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return method(*args, **kwargs)

        return call

    for name in ATOMIC_DYNAMODB_OPERATIONS:  # every one must exist: a lock silently skipped is a race
        replace(DynamoDBBackend, name, locked(getattr(DynamoDBBackend, name)))


#: AttributeValue members whose value moto holds exactly as the wire has it (binary ones it holds decoded).
_SCALAR_MEMBERS = {"S": str, "N": str, "BOOL": bool, "NULL": bool}
_SET_MEMBERS = ("SS", "NS")


def wire_attribute_value(value: Any) -> Any:
    """The JSON an ``AttributeValue`` dict serialises to - the dict itself, already in the wire's form -
    or None when it holds anything but strings, numbers, booleans, nulls, their sets, lists and maps
    (binary: moto's serializer encodes it)."""
    return value if _in_wire_form(value) else None


def _in_wire_form(value: Any) -> bool:
    if not isinstance(value, dict) or len(value) != 1:
        return False
    ((member, inner),) = value.items()
    if member in _SCALAR_MEMBERS:
        return type(inner) is _SCALAR_MEMBERS[member]
    if member in _SET_MEMBERS:
        return isinstance(inner, list) and all(type(v) is str for v in inner)
    if member == "M":
        return isinstance(inner, dict) and all(_in_wire_form(v) for v in inner.values())
    if member == "L":
        return isinstance(inner, list) and all(_in_wire_form(v) for v in inner)
    return False


def _serialize_attribute_values_directly() -> None:
    """moto's response serializer walks botocore's shape for every ``AttributeValue``: each nested
    value tries all ten members through an alias lookup. A job item (the recipe, its progress,
    metrics: ~100 nested values) took 12 ms of CPU per GetItem, 90 % of it there. moto already holds
    items in the wire's form, so an ``AttributeValue`` is written as it is, falling back to the walk
    for anything :func:`wire_attribute_value` does not vouch for."""
    from moto.core.serialize import BaseJSONSerializer

    walk = BaseJSONSerializer._serialize_type_structure

    @functools.wraps(walk)
    def structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if key and shape.name == "AttributeValue":
            wired = wire_attribute_value(value)
            if wired is not None:
                self._default_serialize(serialized, wired, shape, key)
                return
        walk(self, serialized, value, shape, key)

    replace(BaseJSONSerializer, "_serialize_type_structure", structure)


def _convert_items_in_one_pass() -> None:
    """moto's ``DynamoType.to_regular_json`` deep-copies a map or list, then converts each nested
    value of the copy the same way, so every level is copied once per level above it. It runs for
    every item a request reads or writes (UpdateItem converts the item twice). Converted here in
    one pass with the same result: nested values converted, anything else deep-copied."""
    import base64
    import copy

    from moto.dynamodb.models.dynamo_type import DynamoType

    @functools.wraps(DynamoType.to_regular_json)
    def to_regular_json(self: DynamoType) -> dict[str, Any]:
        value = self.value
        if isinstance(value, dict):
            value = {
                k: v.to_regular_json() if isinstance(v, DynamoType) else copy.deepcopy(v) for k, v in value.items()
            }
        elif isinstance(value, list):
            value = [v.to_regular_json() if isinstance(v, DynamoType) else copy.deepcopy(v) for v in value]
        else:
            value = copy.deepcopy(value)
        if self.is_binary() and isinstance(value, str):
            value = base64.b64decode(value)
        return {self.type: value}

    replace(DynamoType, "to_regular_json", to_regular_json)


_PARSED_ASL: dict[str, Any] = {}
_PARSED_ASL_LOCK = threading.Lock()


def _cache_asl_programs() -> None:
    """moto's interpreter parses the ASL with ANTLR (pure Python, ~100 ms of CPU for ours) at the start
    of every execution, inside the moto process every API call waits on, and CreateStateMachine and
    UpdateStateMachine parse it to validate it. The parsed program is immutable - an execution's state
    lives in its ``Environment`` - so parse each definition once (the local cloud's CreateStateMachine
    parses it, before any request comes). A definition that does not parse is not kept: it raises each time."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    parse = AmazonStateLanguageParser.parse

    def parse_once(definition: str) -> Any:
        with _PARSED_ASL_LOCK:
            if definition not in _PARSED_ASL:
                _PARSED_ASL[definition] = parse(definition)
            return _PARSED_ASL[definition]

    def entrypoint(self: Any) -> Any:
        return parse_once(self._evaluation_details.state_machine_details.definition)[0]

    replace(AmazonStateLanguageParser, "parse", staticmethod(parse_once))
    replace(ExecutionWorker, "_get_evaluation_entrypoint", entrypoint)

    # Each JSONPath evaluation builds a new PLY parser (reading its LR tables) for the same few paths.
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    for module in (json_path, result_path):
        replace(module, "parse", functools.lru_cache(maxsize=512)(module.parse))


def without_debug_mode(dispatcher: Any) -> None:
    """moto runs each service's Flask app in debug mode, in which Flask builds a new class for every
    request that has a body (a helper for form errors in ``Request._load_form_data``). Measured with it
    off: about 4 % less CPU per DynamoDB call, and an idle server's polls cost a third as much.
    Exceptions still propagate to the server, which logs them."""
    create = dispatcher.create_app

    def create_app(service: str) -> Any:
        app = create(service)
        app.debug = False
        app.config["PROPAGATE_EXCEPTIONS"] = True
        return app

    dispatcher.create_app = create_app


_TASKS = "moto.stepfunctions.parser.asl.component.state.exec.state_task"
_EXECUTION = "moto.stepfunctions.parser.backend.execution"

#: Every patch, in the order applied. The hashes are of moto 5.2.5 and werkzeug as pinned by it.
PATCHES: tuple[Patch, ...] = (
    Patch(
        "lazy-batch-package",
        "do not import Batch's and EC2's backends for the ASL parser's one Batch enum (1 s a cloud start)",
        {
            "moto.batch": "a9ea75138317db84",
            f"{_TASKS}.service.state_task_service_batch": "25ba79fe0294f0ef",
        },
        _lazy_batch_package,
    ),
    Patch(
        "lambda-invoke",
        "route moto's Lambda invoke to our worker processes",
        {
            "moto.awslambda_simple.models:LambdaSimpleBackend.invoke": "b09b0396b92dd439",
            "moto.awslambda.responses:LambdaResponse.invoke": "ce72022a55b73bec",
        },
        _route_lambda_invoke,
    ),
    Patch(
        "interpreter-clients",
        "one boto3 client per service for the ASL interpreter, not one per task",
        {
            "moto.stepfunctions.parser.asl.utils.boto_client:boto_client_for": "1f44dc2ac8aa2179",
            f"{_TASKS}.lambda_eval_utils": "3b0e86edfb1661db",
            f"{_TASKS}.service.state_task_service_dynamodb": "d372827fa781e08b",
        },
        _share_interpreter_clients,
    ),
    Patch(
        "state-machine-aliases",
        "StartExecution on an alias ARN (moto takes versions only)",
        {
            "moto.stepfunctions.parser.models:StepFunctionsParserBackend.start_execution": "f09a7457fe0637d5",
            "moto.stepfunctions.models:StepFunctionBackend.describe_state_machine": "72b815f5d01f4dd2",
        },
        _start_executions_on_aliases,
    ),
    Patch(
        "stop-at-once",
        "StopExecution makes the execution ABORTED at once, as on AWS (moto waits for the task)",
        {
            f"{_EXECUTION}:Execution.stop": "a99e0e4c1145baf2",
            f"{_EXECUTION}:BaseExecutionWorkerCommunication._reflect_execution_status": "376298d05af9ecb2",
        },
        _stop_executions_at_once,
    ),
    Patch(
        "asl-programs",
        "parse each ASL definition once, each JSONPath once",
        {
            "moto.stepfunctions.parser.asl.parse.asl_parser:AmazonStateLanguageParser.parse": "e08871c8420ad7a1",
            f"{_EXECUTION}_worker:ExecutionWorker._get_evaluation_entrypoint": "e773c5ce42b6efd4",
            "moto.stepfunctions.parser.backend.execution_worker:ExecutionWorker._execution_logic": "b6f86b0dc6b20494",
            "moto.stepfunctions.parser.asl.utils.json_path": "33a9527fc839442d",
            "moto.stepfunctions.parser.asl.component.common.path.result_path": "33b4fae320351419",
        },
        _cache_asl_programs,
    ),
    Patch(
        "atomic-dynamodb",
        "DynamoDB's per-item atomicity (moto's backend has no lock)",
        {
            "moto.dynamodb.models:DynamoDBBackend": "f6071840f3fad4ba",
        },
        atomic_dynamodb,
    ),
    Patch(
        "module-list",
        "moto lists its package directory on every request, inside a global lock",
        {
            "moto.backends:list_of_moto_modules": "4f741a10b06500e8",
            "moto.moto_server.werkzeug_app:DomainDispatcherApplication.get_backend_for_host": "105a0141fcfd0a6d",
        },
        _cache_module_list,
    ),
    Patch(
        "attribute-values",
        "write an AttributeValue moto already holds in wire form as it is",
        {
            "moto.core.serialize:BaseJSONSerializer._serialize_type_structure": "cacf61ed95637b1b",
            "moto.core.serialize:BaseJSONSerializer._default_serialize": "f6b129fafa3a8ae7",
        },
        _serialize_attribute_values_directly,
    ),
    Patch(
        "regular-json",
        "convert an item in one pass (moto deep-copies each level once per level above)",
        {
            "moto.dynamodb.models.dynamo_type:DynamoType.to_regular_json": "bbd91a5bf1787f3e",
        },
        _convert_items_in_one_pass,
    ),
    Patch(
        "method-names",
        "list a response class's methods once, not on every request",
        {
            "moto.core.utils:method_names_from_class": "9dbac89d082b655f",
            "moto.core.responses:BaseResponse.call_action": "34a17a4a36ddf8af",
        },
        _list_handler_methods_once,
    ),
    Patch(
        "update-expressions",
        "parse each UpdateItem expression once (moto parses it twice a call)",
        {
            "moto.dynamodb.parsing.expressions:UpdateExpressionParser.make": "7bda627b702e588f",
            "moto.dynamodb.parsing.validators:Validator.__init__": "68516c2da4600116",
            "moto.dynamodb.responses:DynamoHandler.update_item": "20632da862bdd2e2",
            "moto.dynamodb.responses:DynamoHandler.transact_write_items": "b9f060594221b40c",
            "moto.dynamodb.models:DynamoDBBackend.update_item": "f1d5d4acae8ed91c",
        },
        _parse_update_expressions_once,
    ),
    Patch(
        "processing-maps",
        "each UpdateItem validator's tree walker builds its map of node types once, not twice a node",
        {
            "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.nodes_to_be_processed": "492c7300031d4012",
            "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.process": "f690f826cd910cc5",
            "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser.traverse_node_recursively": "a2419ef6f92ab4fe",
        },
        _build_processing_maps_once,
    ),
    Patch(
        "debug-mode",
        "Flask apps out of debug mode (a new class per request with a body); per server",
        {
            "moto.moto_server.werkzeug_app:create_backend_app": "a317751ebd1c922b",
            "moto.moto_server.werkzeug_app:DomainDispatcherApplication.get_application": "5d1372e9a2e5f6d7",
        },
        None,
    ),
    Patch(
        "keep-alive",
        "keep connections open (werkzeug closes each); cloud/keep_alive.py, per server",
        {
            "werkzeug.serving:WSGIRequestHandler.run_wsgi": "90b08409b3453d78",
            "werkzeug.serving:WSGIRequestHandler.make_environ": "931e485657d9dfcb",
            "moto.moto_server.werkzeug_app:MotoRequestHandler": "fd31947e647cc2fc",
        },
        None,
    ),
)


def apply_patches() -> None:
    """Apply every process-wide patch, once per process (moto's backends are process-wide too)."""
    import moto
    from moto.core.config import default_user_config

    if moto.__version__ != MOTO_VERSION:
        raise EngineError(f"moto {moto.__version__} installed; the local engine is verified with {MOTO_VERSION}")
    default_user_config["stepfunctions"] = {"execute_state_machine": True}
    default_user_config["lambda"] = {"use_docker": False}
    with _PATCH_LOCK:
        if "all" in _APPLIED:
            return
        _APPLIED.add("all")
    for patch in PATCHES:
        if patch.apply is not None:
            patch.apply()
