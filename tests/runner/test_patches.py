"""Every patch of third-party code is checked against the code it was written for.

A new moto or werkzeug that changes a function a patch replaces, or a call site it relies on, fails
here by name: re-read that code, re-check the patch, then record the new hash in ``PATCHES``. And no
patch can go silently stale: ``replace`` refuses a target that is gone.
"""

from __future__ import annotations

import types

import pytest

from chuixiang_local.cloud import moto_patches
from chuixiang_local.cloud.moto_patches import PATCHES as CLOUD_PATCHES
from chuixiang_local.cloud.moto_patches import EngineError, apply_patches, fingerprint, replace
from chuixiang_local.gateway.http_protocol import PATCHES as GATEWAY_PATCHES

PATCHES = (*CLOUD_PATCHES, *GATEWAY_PATCHES)

moto_patches.apply_patches()


@pytest.mark.parametrize(
    ("patch", "ref"),
    [(p, ref) for p in PATCHES for ref in p.relies_on],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_the_patched_code_is_what_the_patch_was_written_for(patch: moto_patches.Patch, ref: str) -> None:
    assert fingerprint(ref) == patch.relies_on[ref], (
        f"{ref} changed under the '{patch.name}' patch ({patch.why}): re-check the patch against the new code, "
        "then record the new fingerprint"
    )


def test_the_fingerprint_is_of_the_original_not_of_the_patch() -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend

    assert LambdaSimpleBackend.invoke.__module__ == "chuixiang_local.cloud.moto_patches"  # applied
    assert (
        fingerprint("moto.awslambda_simple.models:LambdaSimpleBackend.invoke")
        == next(p for p in PATCHES if p.name == "lambda-invoke").relies_on[
            "moto.awslambda_simple.models:LambdaSimpleBackend.invoke"
        ]
    )


def test_a_target_that_is_gone_is_refused_not_added() -> None:
    module = types.ModuleType("somewhere")
    with pytest.raises(EngineError, match="somewhere:boto_client_for is gone"):
        replace(module, "boto_client_for", lambda: None)
    assert not hasattr(module, "boto_client_for")


def test_every_item_operation_is_locked() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    for name in moto_patches.ATOMIC_DYNAMODB_OPERATIONS:  # the lock's wrapper (functools.wraps) is in place
        assert hasattr(getattr(DynamoDBBackend, name), "__wrapped__"), name


def test_another_moto_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local engine's hook into moto fails loudly, never silently falls back to a stub."""
    import moto

    monkeypatch.setattr(moto, "__version__", "9.9.9")
    with pytest.raises(EngineError, match="verified with"):
        apply_patches()
