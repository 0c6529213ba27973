"""The model secret under a customer-managed key: the local cloud judges every read of it against the key
policy, as KMS does (AWS KMS developer guide, *Key policies*: "Unless the key policy explicitly allows it, you
cannot use IAM policies to allow access to a KMS key"). A policy for an administrator alone fails every job at
the model key, with the refusal logged; the default key policy (the account enabled) lets the roles' own
``kms:Decrypt`` statement work."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chuixiang_local.cloud.local_cloud import LocalCloud
from chuixiang_local.gateway.api_client import LocalApi
from chuixiang_local.model.fake_model import FakeModel

from ..support.scaled import SCALED, WHOLE
from ..support.waiting import wait_until

ADMIN_ONLY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::123456789012:user/admin"},
            "Action": "kms:*",
            "Resource": "*",
        }
    ],
}
IAM_ENABLED = {  # KMS's default key policy
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "Enable IAM User Permissions",
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
            "Action": "kms:*",
            "Resource": "*",
        }
    ],
}


@pytest.fixture(scope="module")
def kms_cloud(module_fake: FakeModel, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    work = tmp_path_factory.mktemp("kms")
    with (
        open(work / "functions.log", "w") as log,
        LocalCloud(
            {**SCALED, **WHOLE},
            model_base_url=module_fake.base_url,
            work_dir=Path(work),
            log=log,
            secret_key_policy=ADMIN_ONLY,
        ) as c,
    ):
        yield c


def _ended(api: LocalApi) -> dict[str, Any]:
    status, doc = api.post_dish(f"菜{uuid.uuid4().hex[:8]}")
    assert status == 202, doc
    seen: list[dict[str, Any]] = []

    def ended() -> bool:
        seen.append(api.get(doc["jobId"])[1])
        return seen[-1]["status"] in ("SUCCEEDED", "FAILED")

    wait_until(ended, timeout_s=30, what="the job to end", interval_s=0.1)
    return seen[-1]


def test_the_key_policy_decides_whether_jobs_can_read_the_model_key(kms_cloud: LocalCloud) -> None:
    api = LocalApi(kms_cloud)
    key = kms_cloud.overrides["ModelApiKeyKmsKeyArn"]
    assert key.startswith("arn:aws:kms:")

    locked = _ended(api)
    assert (locked["status"], locked["error"]["code"]) == ("FAILED", "INTERNAL"), locked
    refused = [r for r in kms_cloud.server.gate.refusals if r.authorisation.action == "kms:Decrypt"]
    assert refused and refused[0].authorisation.resource == key
    assert refused[0].principal.role.endswith("RecipeFunctionRole")
    assert "neither allows the role nor enables IAM policies" in refused[0].reason

    kms_cloud.client("kms").put_key_policy(KeyId=key, PolicyName="default", Policy=json.dumps(IAM_ENABLED))
    kms_cloud.server.gate.refusals.clear()
    opened = _ended(api)
    assert opened["status"] == "SUCCEEDED", opened
    assert kms_cloud.server.gate.refusals == []
