"""X-Ray subsegments, read where Lambda's X-Ray daemon would: a UDP socket. Each model call and each AWS call
of a traced invocation is one subsegment under the invocation's segment; an unsampled one sends nothing."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from stack_template import Template

from chuixiang.tracing import trace_aws_calls
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel

from ..support.stages import run_recipe

ROOT_ID, PARENT_ID = "1-5759e988-bd862e3fe1be46a994272793", "53995c3f42cd8ad8"


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A UDP socket standing for the daemon, and a sampled invocation's trace header."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", 0))
        udp.settimeout(2)
        monkeypatch.setenv("AWS_XRAY_DAEMON_ADDRESS", f"127.0.0.1:{udp.getsockname()[1]}")
        monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root={ROOT_ID};Parent={PARENT_ID};Sampled=1")
        yield udp


def received(udp: socket.socket, timeout_s: float = 2) -> list[dict[str, Any]]:
    """Every subsegment sent so far (each datagram: the daemon's header line, then one document)."""
    out = []
    udp.settimeout(timeout_s)
    try:
        while True:
            header, _, body = udp.recv(65536).partition(b"\n")
            assert json.loads(header) == {"format": "json", "version": 1}
            out.append(json.loads(body))
            udp.settimeout(0.2)
    except TimeoutError:
        return out


def test_each_model_call_is_a_subsegment_of_the_invocation(
    daemon: socket.socket, fake: FakeModel, scaled_template: Template
) -> None:
    fake.chat_script.append(ChatBehaviour(status=503))  # one early 503, retried: two calls, two subsegments
    outcome, elapsed_s = run_recipe(scaled_template, fake.base_url, 10_000)
    assert outcome.result is not None
    calls = [s for s in received(daemon) if s["name"].startswith("chat.completions")]
    model = scaled_template.parameters["RecipeModel"]
    assert [(s["annotations"]["attempt"], s["metadata"]["chuixiang"]["outcome"]) for s in calls] == [
        (1, "http_error"),
        (2, "ok"),
    ]
    for s in calls:
        assert (s["trace_id"], s["parent_id"], s["type"], s["namespace"]) == (
            ROOT_ID,
            PARENT_ID,
            "subsegment",
            "remote",
        )
        assert s["annotations"]["model"] == model and len(s["id"]) == 16
        assert 0 <= s["end_time"] - s["start_time"] <= elapsed_s


def test_each_aws_call_is_a_subsegment_named_for_its_service_and_operation(daemon: socket.socket, table: Any) -> None:
    trace_aws_calls(table.meta.client)
    table.put_item(Item={"pk": "JOB#traced"})
    table.get_item(Key={"pk": "JOB#traced"})
    calls = [(s["name"], s["aws"]["operation"], s["http"]["response"]["status"]) for s in received(daemon)]
    assert calls == [("dynamodb", "PutItem", 200), ("dynamodb", "GetItem", 200)]


def test_an_invocation_not_sampled_sends_nothing(
    daemon: socket.socket, monkeypatch: pytest.MonkeyPatch, fake: FakeModel, scaled_template: Template
) -> None:
    monkeypatch.setenv("_X_AMZN_TRACE_ID", f"Root={ROOT_ID};Parent={PARENT_ID};Sampled=0")
    outcome, _ = run_recipe(scaled_template, fake.base_url, 10_000)
    assert outcome.result is not None and received(daemon, timeout_s=0.5) == []
