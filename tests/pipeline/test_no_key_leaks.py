"""A model server that echoes the request's headers, wherever it answers, gets the key nowhere: not in a
function log, a job item, the workflow's execution history or the job document.

The key is not shaped like any key pattern (``sk-…``, a bearer token in a header), so only the redactor's
knowledge of the configured key keeps it out; each case also checks the echo really reached the job item
(as ``[REDACTED]``), so a test that passes because nothing was echoed cannot pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chuixiang.redaction import REDACTED
from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel, ImageBehaviour

from ..support.scaled import SCALED, WHOLE

KEY = "team-key-7f3a9c2e-0b1d"


@pytest.fixture(scope="module")
def leaky(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCloud, Path]]:
    work = tmp_path_factory.mktemp("leaky")
    log_path = work / "functions.log"
    with (
        open(log_path, "w") as log,
        LocalCloud(
            {**SCALED, **WHOLE}, model_base_url=module_fake.base_url, work_dir=work, log=log, model_api_key=KEY
        ) as cloud,
    ):
        yield cloud, log_path


CASES = {
    "sse_error_event": ([ChatBehaviour(kind="error_mid", echo_headers=True)], [], ("error", "RECIPE_UPSTREAM_ERROR")),
    "status_200_not_json": (
        [ChatBehaviour(kind="not_json", echo_headers=True)],
        [],
        ("error", "RECIPE_UPSTREAM_ERROR"),
    ),
    "undecodable_stream_line": (
        [ChatBehaviour(kind="garbage", echo_headers=True)],
        [],
        ("error", "RECIPE_UPSTREAM_ERROR"),
    ),
    "http_error_body": ([ChatBehaviour(status=401, echo_headers=True)], [], ("error", "RECIPE_UPSTREAM_ERROR")),
    "images_answer": ([], [ImageBehaviour(kind="echo")], ("imageError", "IMAGE_INVALID")),
}


@pytest.mark.parametrize("case", CASES)
def test_an_echoed_key_is_nowhere(case: str, leaky: tuple[LocalCloud, Path], module_fake: FakeModel) -> None:
    cloud, log_path = leaky
    chat, images, (field, code) = CASES[case]
    module_fake.chat_script.extend(chat)
    module_fake.image_script.extend(images)
    api = LocalApi(cloud)
    job_id = api.post_dish(f"漏钥匙{case}")[1]["jobId"]
    doc = api.wait(job_id, give_up_s=30)
    assert doc[field] is not None and doc[field]["code"] == code, doc

    item: dict[str, Any] = cloud.job_store().table.get_item(Key={"pk": f"JOB#{job_id}"}, ConsistentRead=True)["Item"]
    assert REDACTED in str(item[field]["detail"]), item[field]  # the upstream did echo it
    history = cloud.client("stepfunctions").get_execution_history(
        executionArn=cloud.execution_arn(job_id), maxResults=1000
    )["events"]
    places = {
        "job document": json.dumps(doc, ensure_ascii=False),
        "job item": str(item),
        "execution history": json.dumps(history, default=str, ensure_ascii=False),
        "function logs": log_path.read_text(errors="replace"),
    }
    leaked = [where for where, text in places.items() if KEY in text]
    assert not leaked, leaked
