"""One generation per dish at a time, and a cached recipe never points at a deleted image."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from chuixiang.api import start_job
from chuixiang.settings import Settings
from chuixiang.stores.jobs import JobStore, dish_key
from chuixiang_local.api_client import LocalApi
from chuixiang_local.fake_model import ChatBehaviour, FakeModel
from chuixiang_local.template import Template


@pytest.mark.pipeline
def test_same_dish_at_once_joins_the_job_generating_it(api: LocalApi, module_fake: FakeModel) -> None:
    module_fake.chat_script.append(ChatBehaviour(chunk_delay_s=0.004))  # ~1 s of streaming
    answers: list[dict[str, Any]] = [{} for _ in range(6)]
    barrier = threading.Barrier(len(answers))

    def start(i: int) -> None:  # six api sandboxes at once (one handler in-process is one request at a time)
        barrier.wait()
        answers[i] = start_job({"dish": "单飞测试菜"})

    threads = [threading.Thread(target=start, args=(i,)) for i in range(len(answers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    status, through_http = api.post_dish(" 单飞测试菜 ")  # the same after normalising, while it generates
    assert status == 202
    answers.append(through_http)
    job_ids = {a["jobId"] for a in answers}
    assert len(job_ids) == 1, answers
    assert all(a["deadlineAt"] for a in answers)
    doc = api.wait(job_ids.pop(), give_up_s=30)
    assert doc["status"] == "SUCCEEDED"
    assert module_fake.count("/chat/completions") == 1  # one model call for seven requests
    # Once it has ended, the same dish is a new job (served from the cache: still no model call).
    status, later = api.post_dish("单飞测试菜")
    assert status == 202 and later["jobId"] != doc["jobId"]
    assert api.wait(later["jobId"], give_up_s=30)["status"] == "SUCCEEDED"
    assert module_fake.count("/chat/completions") == 1


def test_cache_entry_expires_before_its_image(table: Any, scaled_template: Template) -> None:
    retention = int(scaled_template.number("ImageRetentionDays"))
    lifecycle = scaled_template.doc["Resources"]["ImagesBucket"]["Properties"]["LifecycleConfiguration"]["Rules"][0]
    assert lifecycle["ExpirationInDays"] == {"Ref": "ImageRetentionDays"}
    store = JobStore(Settings.model_validate({"IMAGE_RETENTION_DAYS": str(retention)}), table=table)
    store.put_cache("红烧肉", recipe={"name": "红烧肉"})
    store.put_cache("红烧肉", image_key="images/a.png")
    entry = store.cached("红烧肉")
    assert entry and entry["imageKey"] == "images/a.png"
    days_left = (entry["expiresAt"] - entry_time(entry)) / 86400
    assert retention - 1.01 < days_left <= retention - 1  # a day before the bucket deletes the image
    # A new recipe for the dish drops the old picture's key (a new one is being drawn).
    store.put_cache("红烧肉", recipe={"name": "红烧肉 v2"})
    assert "imageKey" not in (store.cached("红烧肉") or {})
    # Past its expiry the entry is a miss, even before DynamoDB's TTL has deleted it.
    table.update_item(Key=dish_key("红烧肉"), UpdateExpression="SET expiresAt = :past",
                      ExpressionAttributeValues={":past": 1})
    assert store.cached("红烧肉") is None


def entry_time(entry: dict[str, Any]) -> float:
    from chuixiang.clock import parse_iso

    return parse_iso(entry["updatedAt"]).timestamp()
