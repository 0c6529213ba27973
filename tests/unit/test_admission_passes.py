"""Wide passes (``RecipeSections=auto``): a job may write in sections while the streams are free and no one
waits, and the streams held never exceed ``limit``, whatever arrives at once (on an in-process moto table whose
item operations, transactions among them, are atomic as DynamoDB's are)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from chuixiang.stores.admission import Admission, Refused, is_wide

DEADLINE = 2**31
LIMIT, WIDTH = 12, 4  # three passes of four streams


def auto(table: Any) -> Admission:
    return Admission(table, LIMIT, passes=LIMIT // WIDTH, width=WIDTH)


def streams(slots: Sequence[int | Refused]) -> int:
    return sum(WIDTH if is_wide(s) else 1 for s in slots if not isinstance(s, Refused))


def test_a_quiet_stack_gives_each_newcomer_a_pass_until_the_streams_are_held(table: Any) -> None:
    a = auto(table)
    taken = [a.admit(f"job-{n}", f"caller-{n}", DEADLINE) for n in range(4)]
    assert [is_wide(s) for s in taken[:3] if not isinstance(s, Refused)] == [True, True, True]
    assert isinstance(taken[3], Refused)  # every slot is covered by a held pass: 12 streams held
    assert streams(taken) == LIMIT


def test_while_others_wait_in_line_a_caller_is_admitted_with_one_stream(table: Any) -> None:
    a = auto(table)
    wide = [a.admit(f"job-{n}", f"caller-{n}", DEADLINE) for n in range(3)]
    assert all(isinstance(a.admit(f"w{n}", f"waiter-{n}", DEADLINE), Refused) for n in range(2))  # two in line
    assert not isinstance(wide[0], Refused)
    a.release("job-0", wide[0])  # a pass frees: four streams
    first = a.admit("w0-again", "waiter-0", DEADLINE)
    assert isinstance(first, int) and not is_wide(first)  # waiter-1 still waits: one stream
    second = a.admit("w1-again", "waiter-1", DEADLINE)
    assert isinstance(second, int) and not is_wide(second)  # no one waits, but no pass is whole any more
    assert streams([*wide[1:], first, second]) == 2 * WIDTH + 2


def test_a_pass_and_the_slots_it_covers_exclude_each_other_and_narrow_jobs_pack(table: Any) -> None:
    a = auto(table)
    item = {"jobId": "j", "caller": "c", "expiresAt": DEADLINE, "takenAt": 0}
    assert a._take_pass(0, item, 0)
    assert not a._take_slot(0, item, 0) and not a._take_slot(3, item, 0)  # under the held pass
    assert a._take_slot(8, item, 0)
    assert not a._take_pass(2, item, 0)  # slot 8 is held: pass 2 cannot be
    seen = a._read("c")
    # The next narrow job goes where a range is already broken (8..11), not into pass 1's whole range.
    assert all(8 <= n <= 11 for n in a._packed(seen, a._free(seen), ticket=5)[:3])


def test_requests_at_the_same_moment_never_hold_more_streams_than_the_limit(table: Any) -> None:
    a = auto(table)
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
    assert admitted and streams(admitted) <= LIMIT
    assert len({int(s) for s in admitted}) == len(admitted)  # no slot or pass given twice


def test_the_recipe_stage_may_open_the_sections_streams_only_with_a_pass() -> None:
    from chuixiang.settings import Settings
    from chuixiang.steps import _streams_granted

    items = {"wide": {"slot": -3}, "narrow": {"slot": 7}, "no-api": {}}

    class Store:
        def get(self, job_id: str) -> dict[str, Any] | None:
            return items.get(job_id)

    auto = Settings.model_validate({"RECIPE_SECTIONS": "auto"})
    parallel = Settings.model_validate({"RECIPE_SECTIONS": "parallel"})
    granted = {job: _streams_granted(auto, Store(), job) for job in items}  # type: ignore[arg-type]
    assert granted == {"wide": 11, "narrow": 1, "no-api": 11}  # started without the API: nothing admitted it
    assert _streams_granted(parallel, Store(), "narrow") == 11  # type: ignore[arg-type]
