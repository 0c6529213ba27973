"""A GET of another caller's job and a GET of a missing id do the same table reads, in the same order, so how
long the 404 takes says nothing of whether a leaked id exists (it took 14.7 ms against 6.8 ms, 200 of 200 pairs:
the other caller's whole item was read and parsed before the owner check)."""

from __future__ import annotations

from typing import Any

import pytest

from chuixiang import job_view
from chuixiang.settings import Settings
from chuixiang.stores.jobs import JobStore

ALICE, MALLORY = "sub:alice", "sub:mallory"


class Recording:
    """The table, with each call it is asked to make recorded (its name and the request's shape)."""

    def __init__(self, table: Any) -> None:
        self.table, self.calls = table, list[tuple[str, tuple[str, ...]]]()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.table, name)

        def recorded(**request: Any) -> Any:
            shape = tuple(sorted(k for k in request if k != "Key"))
            self.calls.append((name, (*shape, str(request.get("ProjectionExpression", "")))))
            return method(**request)

        return recorded


def reads_of(job_id: str, caller: str, table: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Any]]:
    recording = Recording(table)
    monkeypatch.setattr(job_view, "JobStore", lambda settings: JobStore(settings, recording))  # type: ignore[arg-type]
    return job_view.load_job_document(job_id, caller), recording.calls


def test_another_callers_job_and_a_missing_one_cost_the_same_reads(table: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JobStore(Settings(), table)
    store.create("alices-job", "番茄炒蛋", owners={ALICE}, recipe={"steps": ["x" * 2000] * 12})
    theirs, theirs_reads = reads_of("alices-job", MALLORY, table, monkeypatch)
    missing, missing_reads = reads_of("no-such-job", MALLORY, table, monkeypatch)
    assert theirs is None and missing is None  # both 404
    assert theirs_reads == missing_reads and len(theirs_reads) == 1, (theirs_reads, missing_reads)
    assert "owners" in theirs_reads[0][1][-1]  # the one read fetches the owners alone, not the item
    mine, my_reads = reads_of("alices-job", ALICE, table, monkeypatch)
    assert mine is not None and mine.dish == "番茄炒蛋" and len(my_reads) >= 2  # its owner reads it whole
