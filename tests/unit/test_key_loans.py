"""What a key lends a job in sections beyond its own stream (the policy, then the DynamoDB store on moto): never a
stream a newcomer's job needs, nothing while the key refuses lately, a probe after a wait that doubles while the
key keeps refusing, and no loan granted twice from the same spare."""

from __future__ import annotations

import threading
from typing import Any

from chuixiang.resilience.key_loans import (
    PROBE_FIRST_S,
    PROBE_MAX_S,
    KeyQuotas,
    KeyRecord,
    MemoryKeyStore,
    given_back,
    lend,
    lent,
)
from chuixiang.stores.key_streams import DynamoKeyStore, KeyLender

T0 = 1_000_000.0
UNTIL = T0 + 300


def test_a_key_that_never_refused_lends_what_is_asked() -> None:
    loan = lend(KeyRecord(), KeyQuotas(jobs=100), "j", 6, 4_000, T0)
    assert (loan.streams, loan.tokens, loan.probe) == (6, 4_000, False)


def test_a_stated_quota_lends_only_beyond_every_admitted_jobs_own_stream() -> None:
    """``RecipeKeyStreams`` 20 beside 10 jobs: 10 to lend, all or nothing per plan, each loan counted."""
    quotas = KeyQuotas(streams=20, jobs=10)
    first = lend(KeyRecord(), quotas, "a", 6, 0, T0)
    assert first.streams == 6
    record = lent(KeyRecord(), "a", first, T0, UNTIL)
    refused = lend(record, quotas, "b", 6, 0, T0)
    assert refused.streams == 0 and "4 spare beside 10 jobs' own" in refused.why
    assert lend(record, quotas, "b", 4, 0, T0).streams == 4
    # A loan lapses at its lease (its job died without giving it back); given back, it is spare again.
    assert lend(record, quotas, "b", 6, 0, UNTIL + 1).streams == 6
    assert lend(given_back(record, "a", T0, refused=False), quotas, "b", 6, 0, T0).streams == 6
    # As many jobs as the key takes: nothing to lend, ever.
    assert lend(KeyRecord(), KeyQuotas(streams=2, jobs=100), "c", 3, 0, T0).streams == 0


def test_a_stated_tokens_per_minute_lends_what_the_minute_has_left_after_every_jobs_whole_answer() -> None:
    quotas = KeyQuotas(tokens_per_minute=100_000, jobs=20, whole_tokens=3_400)  # 68,000 kept for whole answers
    assert lend(KeyRecord(), quotas, "a", 6, 30_000, T0).streams == 6
    record = lent(KeyRecord(), "a", lend(KeyRecord(), quotas, "a", 6, 30_000, T0), T0, UNTIL)
    assert lend(record, quotas, "b", 6, 3_000, T0 + 10).streams == 0  # 2,000 left this minute
    assert lend(record, quotas, "b", 6, 3_000, T0 + 61).streams == 6  # the loan's minute has passed


def test_after_a_refusal_nothing_is_lent_until_a_probe_and_a_refused_probe_doubles_the_wait() -> None:
    quotas = KeyQuotas(jobs=100)
    record = given_back(KeyRecord(), "whole-job", T0, refused=True)  # any call of the key answered 429
    quiet = lend(record, quotas, "a", 6, 0, T0 + 10)
    assert quiet.streams == 0 and "refused a call 10 s ago" in quiet.why
    probe = lend(record, quotas, "a", 6, 0, T0 + PROBE_FIRST_S)
    assert probe.streams == 6 and probe.probe
    probing = lent(record, "a", probe, T0 + PROBE_FIRST_S, UNTIL + PROBE_FIRST_S)
    assert lend(probing, quotas, "b", 6, 0, T0 + PROBE_FIRST_S).streams == 0  # one probe at a time
    refused_again = given_back(probing, "a", T0 + PROBE_FIRST_S, refused=True)
    assert refused_again.probe_after_s == 2 * PROBE_FIRST_S and refused_again.probing is None
    assert lend(refused_again, quotas, "b", 6, 0, T0 + 2 * PROBE_FIRST_S).streams == 0
    assert lend(refused_again, quotas, "b", 6, 0, T0 + 3 * PROBE_FIRST_S).streams == 6
    # The wait stops doubling at its cap; a probe that ran clean forgets every refusal.
    capped = KeyRecord(refused_at=T0, probe_after_s=PROBE_MAX_S, probing="p")
    assert given_back(capped, "p", T0, refused=True).probe_after_s == PROBE_MAX_S
    clean = given_back(probing, "a", T0 + PROBE_FIRST_S + 30, refused=False)
    assert clean.refused_at is None and lend(clean, quotas, "c", 6, 0, T0 + PROBE_FIRST_S + 31).streams == 6


def test_the_dynamodb_store_keeps_the_record_and_writes_only_over_the_version_read(table: Any) -> None:
    store = DynamoKeyStore(table, "http://model.example/v1/", "m")
    assert store.read() == KeyRecord()
    record = given_back(KeyRecord(), "j", T0, refused=True)
    assert store.write(record, 0) and not store.write(record, 0)  # created once
    loaned = lent(record, "k", lend(record, KeyQuotas(), "k", 3, 10, T0 + PROBE_FIRST_S), T0, UNTIL)
    assert store.write(loaned, record.version) and not store.write(loaned, record.version)
    assert store.read() == loaned
    cleared = given_back(loaned, "k", T0 + PROBE_FIRST_S, refused=False)
    assert store.write(cleared, loaned.version) and store.read() == cleared  # refusedAt and probing removed


def test_jobs_borrowing_at_the_same_moment_never_share_one_spare(table: Any) -> None:
    """Twelve jobs ask for 6 streams each of a key with 20 beside 2 jobs' own (18 spare): three get them."""
    quotas = KeyQuotas(streams=20, jobs=2)
    store = DynamoKeyStore(table, "http://model.example/v1", "m")
    got: list[int] = []
    lock = threading.Lock()

    def borrow(n: int) -> None:
        loan = KeyLender(store, quotas, f"job-{n}", UNTIL, clock=lambda: T0).borrow(6, 0)
        with lock:
            got.append(loan.streams)

    threads = [threading.Thread(target=borrow, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(got) <= 18 and sum(got) == sum(e.streams for e in store.read().loans.values())


def test_a_lender_gives_its_loan_back_and_records_what_the_key_said() -> None:
    store = MemoryKeyStore()
    lender = KeyLender(store, KeyQuotas(jobs=4), "j", UNTIL, clock=lambda: T0)
    assert lender.borrow(5, 0).streams == 5 and store.read().loans["j"].streams == 5
    lender.give_back(refused=True)
    assert store.read().loans == {} and store.read().refused_at == T0
    quiet = KeyLender(store, KeyQuotas(jobs=4), "k", UNTIL, clock=lambda: T0 + 5)
    assert quiet.borrow(5, 0).streams == 0
    quiet.give_back(refused=False)  # borrowed nothing, saw nothing: nothing written
    assert store.read().refused_at == T0
