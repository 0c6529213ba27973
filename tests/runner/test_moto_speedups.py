"""The local cloud's changes to moto's cost: the same answers as moto's own code, and the api
function's calls served first under ``serve``."""

from __future__ import annotations

import base64
import copy
import json
import threading
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from werkzeug.test import Client

from chuixiang_local.cloud.front_door import FrontDoorCallsFirst, PriorityGate
from chuixiang_local.cloud.local_cloud import API_ACCESS_KEY_ID
from chuixiang_local.cloud.moto_patches import apply_patches, wire_attribute_value

from ..support.waiting import wait_until

apply_patches()

#: Every AttributeValue type, nested: maps in lists in maps, empty ones, binary inside and outside maps.
ITEM: dict[str, Any] = {
    "pk": {"S": "JOB#1"},
    "n": {"N": "12.5"},
    "ok": {"BOOL": True},
    "none": {"NULL": True},
    "ss": {"SS": ["a", "b"]},
    "ns": {"NS": ["1", "2"]},
    "b": {"B": b"\x00\xff"},
    "bs": {"BS": [b"x", b"y"]},
    "recipe": {
        "M": {
            "name": {"S": "番茄炒蛋"},
            "empty": {"S": ""},
            "steps": {
                "L": [{"M": {"order": {"N": "1"}, "text": {"S": "打蛋"}}}, {"L": [{"NULL": True}, {"BOOL": False}]}]
            },
        }
    },
    "withBinary": {"M": {"png": {"B": b"\x89PNG"}, "text": {"S": "x"}}},
    "emptyMap": {"M": {}},
    "emptyList": {"L": []},
}


def _wire(value: Any) -> Any:
    """The item as the request's JSON carries it (binary as base64)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


def _answer(client: Client, action: str, body: dict[str, Any]) -> tuple[int, Any]:
    """The status and JSON body of one DynamoDB call."""
    answer = client.post(
        "/",
        data=json.dumps(body),
        headers={
            "X-Amz-Target": f"DynamoDB_20120810.{action}",
            "Content-Type": "application/x-amz-json-1.0",
            "Authorization": "AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/dynamodb/aws4_request, "
            "SignedHeaders=host, Signature=0",
        },
    )
    return answer.status_code, json.loads(answer.text)


def _dynamodb(client: Client, action: str, body: dict[str, Any]) -> Any:
    status, answer = _answer(client, action, body)
    assert status == 200, answer
    return answer


def test_items_are_answered_as_moto_itself_answers_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.core.serialize import BaseJSONSerializer
    from moto.server import DomainDispatcherApplication, create_backend_app  # type: ignore[attr-defined]

    client = Client(DomainDispatcherApplication(create_backend_app))
    _dynamodb(
        client,
        "CreateTable",
        {
            "TableName": "speedups",
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        },
    )
    _dynamodb(client, "PutItem", {"TableName": "speedups", "Item": _wire(ITEM)})
    reads: list[tuple[str, dict[str, Any]]] = [
        ("GetItem", {"TableName": "speedups", "Key": {"pk": {"S": "JOB#1"}}, "ConsistentRead": True}),
        ("Scan", {"TableName": "speedups"}),
        (
            "UpdateItem",
            {
                "TableName": "speedups",
                "Key": {"pk": {"S": "JOB#1"}},
                "ReturnValues": "ALL_NEW",
                "UpdateExpression": "SET n = :n",
                "ExpressionAttributeValues": {":n": {"N": "12.5"}},
            },
        ),
    ]
    fast = [_dynamodb(client, action, body) for action, body in reads]
    walked = BaseJSONSerializer._serialize_type_structure.__wrapped__  # type: ignore[attr-defined]
    monkeypatch.setattr(BaseJSONSerializer, "_serialize_type_structure", walked)
    assert fast == [_dynamodb(client, action, body) for action, body in reads]
    assert fast[0]["Item"] == _wire(ITEM)


#: Update expressions of every kind the validator's walkers process: paths nested and named, arithmetic, functions,
#: ADD, DELETE and REMOVE, and the ones it refuses (a path that does not exist, an empty string for the key).
UPDATES: list[tuple[str, dict[str, str], dict[str, Any]]] = [
    (
        "SET #r.#name = :s, n = n + :one REMOVE #none",
        {"#r": "recipe", "#name": "name", "#none": "none"},
        {":s": {"S": "宫保鸡丁"}, ":one": {"N": "1"}},
    ),
    (
        "SET l = list_append(if_not_exists(l, :empty), :l), m = if_not_exists(m, :s)",
        {},
        {":empty": {"L": []}, ":l": {"L": [{"S": "x"}]}, ":s": {"S": "y"}},
    ),
    ("ADD ss :ss, tally :one DELETE ns :ns", {}, {":ss": {"SS": ["c"]}, ":one": {"N": "2"}, ":ns": {"NS": ["1"]}}),
    (
        "SET #r.#steps[0].#t = :s, n = :n - n",
        {"#r": "recipe", "#steps": "steps", "#t": "text"},
        {":s": {"S": "搅匀"}, ":n": {"N": "20"}},
    ),
    ("SET nowhere.deeper = :s", {}, {":s": {"S": "x"}}),
    ("SET pk = :empty", {}, {":empty": {"S": ""}}),
]


def test_updates_are_validated_and_applied_as_moto_itself_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.server import DomainDispatcherApplication, create_backend_app  # type: ignore[attr-defined]

    from chuixiang_local.cloud.moto_patches import resolve

    def applied() -> list[Any]:
        client = Client(DomainDispatcherApplication(create_backend_app))
        table = {"TableName": "walkers", "BillingMode": "PAY_PER_REQUEST"}
        keys = {"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}]}
        _dynamodb(
            client,
            "CreateTable",
            {**table, **keys, "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}]},
        )
        answers = []
        for expression, names, values in UPDATES:
            _dynamodb(client, "PutItem", {"TableName": "walkers", "Item": _wire(ITEM)})
            body = {"TableName": "walkers", "Key": {"pk": {"S": "JOB#1"}}, "ReturnValues": "ALL_NEW"}
            body |= {"UpdateExpression": expression, "ExpressionAttributeValues": values}
            answers.append(_answer(client, "UpdateItem", body | ({"ExpressionAttributeNames": names} if names else {})))
        _dynamodb(client, "DeleteTable", {"TableName": "walkers"})
        return answers

    fast = applied()
    assert [status for status, _ in fast] == [200, 200, 200, 200, 400, 400], fast
    walker = "moto.dynamodb.parsing.ast_nodes:DepthFirstTraverser"
    for name in ("nodes_to_be_processed", "process"):
        monkeypatch.setattr(resolve(walker), name, resolve(f"{walker}.{name}"))
    assert fast == applied()


def test_only_what_is_held_as_the_wire_has_it_is_written_directly() -> None:
    assert wire_attribute_value(ITEM["recipe"]) == ITEM["recipe"]
    assert wire_attribute_value({"SS": ["a"]}) == {"SS": ["a"]}
    walked: Any
    for walked in (
        {"B": b"x"},
        {"BS": [b"x"]},
        ITEM["withBinary"],
        {"L": [{"S": "a"}, {"B": b"x"}]},
        {"N": 1},
        {"S": "a", "N": "1"},
        {},
        {"M": []},
        {"X": "?"},
        "S",
    ):
        assert wire_attribute_value(walked) is None, walked


def test_items_convert_to_plain_json_as_moto_converts_them() -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    item = Item(DynamoType(ITEM["pk"]), None, copy.deepcopy(ITEM))
    one_pass = item.to_json()
    original = DynamoType.to_regular_json.__wrapped__  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DynamoType, "to_regular_json", original)
        assert one_pass == item.to_json()
    one_pass["Attributes"]["recipe"]["M"]["steps"]["L"][1]["L"].append({"S": "changed"})  # a copy, not the item
    assert item.to_json() == item.to_json() != one_pass


# --- the api function's calls first ------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _queue(gate: PriorityGate, first: bool, name: str, order: list[str]) -> threading.Thread:
    def call() -> None:
        gate.enter(first)
        order.append(name)
        gate.leave()

    waiting = gate.waiting()
    thread = threading.Thread(target=call)
    thread.start()
    wait_until(
        lambda: gate.waiting() > waiting, timeout_s=10, what=f"{name} queued", interval_s=0.001
    )  # in line before the next one comes
    return thread


def test_the_front_door_goes_first_and_each_class_in_arrival_order() -> None:
    gate, order = PriorityGate(), list[str]()
    gate.enter(first=False)  # a function's call is being served
    threads = [
        _queue(gate, first, name, order)
        for first, name in ((False, "f1"), (True, "api1"), (False, "f2"), (True, "api2"))
    ]
    gate.leave()
    for thread in threads:
        thread.join(5)
    assert order == ["api1", "api2", "f1", "f2"]


def test_a_function_call_that_has_waited_max_wait_goes_before_the_front_door() -> None:
    clock = FakeClock()
    gate, order = PriorityGate(max_wait_s=2.0, clock=clock), list[str]()
    gate.enter(first=True)
    threads = [_queue(gate, False, "f1", order)]
    clock.now = 1.9
    threads.append(_queue(gate, True, "api1", order))
    clock.now = 2.0
    threads.append(_queue(gate, True, "api2", order))
    gate.leave()
    for thread in threads:
        thread.join(5)
    assert order == ["f1", "api1", "api2"]
    assert gate.entered == {True: 3, False: 1} and gate.let_go == 1


def test_the_functions_keep_one_turn_in_four_however_many_api_calls_wait() -> None:
    # Clients that POST again at once on a 429 keep API calls waiting all the time; with the API's
    # calls strictly first, the running jobs' calls waited out their functions' Timeouts.
    gate, order = PriorityGate(max_wait_s=3600, first_turns=3), list[str]()
    gate.enter(first=True)
    threads = [_queue(gate, False, "f1", order), _queue(gate, False, "f2", order)]
    threads += [_queue(gate, True, f"api{i}", order) for i in range(1, 8)]
    gate.leave()
    for thread in threads:
        thread.join(5)
    assert order == ["api1", "api2", "api3", "f1", "api4", "api5", "api6", "f2", "api7"]
    assert gate.let_go == 2


def test_sixty_threads_pass_one_at_a_time_and_none_is_lost() -> None:
    gate, inside, most, done = PriorityGate(max_wait_s=0.01), [0], [0], []
    lock = threading.Lock()

    def calls(first: bool) -> None:
        for _ in range(30):
            gate.enter(first)
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            with lock:
                inside[0] -= 1
            gate.leave()
        done.append(first)

    threads = [threading.Thread(target=calls, args=(i % 3 == 0,)) for i in range(60)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(done) == 60 and most[0] == 1 and gate.waiting() == 0


def _signed_environ(access_key: str, path: str = "/") -> dict[str, Any]:
    """The WSGI environ of a request botocore signed with ``access_key``, as moto's server sees it."""
    request = AWSRequest(method="POST", url=f"http://127.0.0.1:5000{path}", data=b"{}")
    SigV4Auth(Credentials(access_key, "secret"), "dynamodb", "us-east-1").add_auth(request)
    return {"PATH_INFO": path, "HTTP_AUTHORIZATION": request.headers["Authorization"]}


def test_the_api_functions_calls_are_told_apart_by_its_access_key() -> None:
    gated = FrontDoorCallsFirst(lambda environ, start: [b""], API_ACCESS_KEY_ID)
    assert gated.is_front_door(_signed_environ(API_ACCESS_KEY_ID))
    assert not gated.is_front_door(_signed_environ("testing"))
    assert not gated.is_front_door({"PATH_INFO": "/bucket/image.png"})  # a presigned or unsigned GET


def test_a_lambda_invoke_is_not_gated_while_its_functions_calls_are() -> None:
    seen: list[str] = []

    def app(environ: dict[str, Any], start: Any) -> list[bytes]:
        seen.append(environ["PATH_INFO"])
        return [b""]

    gated = FrontDoorCallsFirst(app, API_ACCESS_KEY_ID)
    gated.gate.enter(first=False)  # a call is being served: every gated call waits
    invoke = "/2015-03-31/functions/cx-recipe/invocations"
    assert gated(_signed_environ("testing", invoke), lambda *a: None) == [b""]
    call = threading.Thread(target=gated, args=(_signed_environ("testing"), lambda *a: None))
    call.start()
    wait_until(gated.gate.waiting, timeout_s=10, what="the function's call queued", interval_s=0.001)
    assert seen == [invoke]
    gated.gate.leave()
    call.join(5)
    assert seen == [invoke, "/"]
