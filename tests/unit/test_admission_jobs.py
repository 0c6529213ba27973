"""Admission counts jobs (``RecipeConcurrency`` is jobs at once, each holding one model stream): a burst
of ``limit`` callers is all admitted whatever mode their recipes are written in, and requests at the same moment
never hold more than ``limit`` slots (on an in-process moto table whose conditional writes are atomic as
DynamoDB's are)."""

from __future__ import annotations

import threading
from typing import Any

from chuixiang.settings import Settings
from chuixiang.stores.admission import Admission, Refused

DEADLINE = 2**31
LIMIT = 12


def test_a_burst_of_limit_callers_is_all_admitted_and_the_next_waits(table: Any) -> None:
    a = Admission(table, LIMIT)
    taken = [a.admit(f"job-{n}", f"caller-{n}", DEADLINE) for n in range(LIMIT + 1)]
    assert all(isinstance(s, int) for s in taken[:LIMIT]) and isinstance(taken[LIMIT], Refused)
    assert sorted(s for s in taken[:LIMIT] if isinstance(s, int)) == list(range(LIMIT))


def test_requests_at_the_same_moment_never_hold_more_slots_than_the_limit(table: Any) -> None:
    a = Admission(table, LIMIT)
    results: list[int | Refused] = []
    lock = threading.Lock()

    def ask(n: int) -> None:
        got = a.admit(f"job-{n}", f"caller-{n}", DEADLINE)
        with lock:
            results.append(got)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    admitted = [r for r in results if not isinstance(r, Refused)]
    assert 0 < len(admitted) <= LIMIT
    assert len(set(admitted)) == len(admitted)  # no slot given twice


def test_jobs_at_once_are_recipe_concurrency_in_every_mode_and_no_more_than_the_key_takes() -> None:
    """A job written in sections no longer counts its streams at admission (it borrows them from the key when it
    opens them): ``RecipeConcurrency`` jobs in every mode; with the key's quota stated, no more jobs than it."""
    for mode in ("auto", "whole", "parallel"):
        assert Settings.model_validate({"ADMISSION_SLOTS": "30", "RECIPE_SECTIONS": mode}).admission_jobs == 30
    capped = Settings.model_validate({"ADMISSION_SLOTS": "30", "RECIPE_KEY_STREAMS": "2"})
    assert capped.admission_jobs == 2
    roomy = Settings.model_validate({"ADMISSION_SLOTS": "30", "RECIPE_KEY_STREAMS": "200"})
    assert roomy.admission_jobs == 30
