"""The account's Lambda concurrency quota, enforced as Lambda enforces it: an invocation beyond it is
throttled (429 TooManyRequestsException) and the job ends as the ASL's Retry and Catch decide; a reservation
the account cannot give fails the deploy; the ladder refuses a quota that cannot hold the peak."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from stack_template import ConfigError

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import FakeModel

from ..support.commands import run_cli
from ..support.scaled import SCALED

# Waits on its scaled limits more than it computes (~2.4 s of CPU in ~4.0 s alone): the waiting lane's.
pytestmark = pytest.mark.waiting

QUOTA = 5


def test_a_job_whose_stage_is_throttled_fails_after_the_asl_retries(module_fake: FakeModel, tmp_path: Path) -> None:
    with (
        open(tmp_path / "log", "w") as log,
        LocalCloud(
            SCALED, model_base_url=module_fake.base_url, work_dir=tmp_path, log=log, account_concurrency=QUOTA
        ) as cloud,
    ):
        api = LocalApi(cloud)
        for _ in range(QUOTA):  # other functions of the account hold all of it
            assert cloud.concurrency.acquire("another-app")
        job_id = api.post_dish("被限流的菜")[1]["jobId"]
        throttled = api.wait(job_id, give_up_s=30)
        stored = cloud.job_store().get(job_id) or {}
        for _ in range(QUOTA):
            cloud.concurrency.release("another-app")
        served = api.wait(api.post_dish("不限流的菜")[1]["jobId"], give_up_s=30)
        attempts = sum(cloud.concurrency.throttles.values())
    assert throttled["status"] == "FAILED" and throttled["error"]["code"] == "INTERNAL", throttled
    assert stored["error"]["detail"] == "Lambda.TooManyRequestsException"  # the job item keeps the cause
    assert attempts == 3  # the first try and the ASL's two retries (Retry MaxAttempts 2)
    assert served["status"] == "SUCCEEDED", served


def test_a_reservation_the_account_cannot_give_fails_the_deploy(module_fake: FakeModel, tmp_path: Path) -> None:
    with (
        pytest.raises(ConfigError, match="minimum value"),
        LocalCloud(
            {**SCALED, "RecipeReservedConcurrency": "20"},
            model_base_url=module_fake.base_url,
            work_dir=tmp_path,
            account_concurrency=50,
        ),
    ):
        pass


def test_the_ladder_refuses_a_quota_that_cannot_hold_the_peak() -> None:
    def ladder(quota: int) -> subprocess.CompletedProcess[str]:
        return run_cli("ladder", "--account-concurrency", str(quota), timeout=60)

    new_account, default = ladder(10), ladder(1000)
    assert new_account.returncode == 2 and "quota 10 (10 unreserved) cannot hold 132" in new_account.stderr
    assert default.returncode == 0, default.stderr
