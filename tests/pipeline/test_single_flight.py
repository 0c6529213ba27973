"""One generation per dish at a time, and a cached recipe never points at a deleted image."""

from __future__ import annotations

import threading
from typing import Any

from chuixiang.job_start import start_job
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import ChatBehaviour, FakeModel


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
