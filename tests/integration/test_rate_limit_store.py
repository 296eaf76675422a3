"""GCRA in one statement against a real PostgreSQL: the burst is admitted, the next request
refused with the exact wait, recovery after it; all or nothing across buckets. Time is passed
in (``now``), never slept."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from context_ledger.db import connection
from context_ledger.ratelimit import store
from context_ledger.ratelimit.buckets import Bucket, BucketKind
from context_ledger.ratelimit.store import Verdict

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def bucket(name: str, per_minute: int, burst_seconds: float = 10) -> Bucket:
    key = hashlib.sha256(name.encode()).digest()
    return Bucket(BucketKind.ORGANISATION, key, per_minute, burst_seconds)


def take(*buckets: Bucket, at: float = 0.0, cost: int = 1) -> list[Verdict]:
    with connection() as conn:
        return store.take(conn, buckets, cost=cost, now=T0 + timedelta(seconds=at))


def admitted(*buckets: Bucket, at: float = 0.0, cost: int = 1) -> bool:
    return not any(v.refused for v in take(*buckets, at=at, cost=cost))


def spent_burst() -> Bucket:
    """1 request a second, 10 at once; the 10 taken at T0."""
    org = bucket("org", per_minute=60, burst_seconds=10)
    for _ in range(10):
        take(org)
    return org


def test_the_burst_is_admitted_at_once_and_the_next_request_refused(db) -> None:
    org = bucket("org", per_minute=60, burst_seconds=10)  # 1 per second, 10 at once

    burst = [admitted(org) for _ in range(10)]
    [refused] = take(org)

    assert all(burst)
    assert refused.refused
    assert refused.wait_seconds == pytest.approx(1.0)


def test_the_wait_is_the_time_until_the_next_emission(db) -> None:
    org = spent_burst()

    [early] = take(org, at=0.25)

    assert early.wait_seconds == pytest.approx(0.75)


def test_a_refused_request_is_admitted_after_its_wait(db) -> None:
    org = spent_burst()
    [refused] = take(org, at=0.25)

    assert admitted(org, at=0.25 + refused.wait_seconds)
    assert not admitted(org, at=0.25 + refused.wait_seconds)  # one per second again


def test_an_idle_bucket_refills_to_its_burst_and_no_further(db) -> None:
    org = spent_burst()

    later = [admitted(org, at=3600) for _ in range(11)]

    assert later == [True] * 10 + [False]


def test_the_sustained_rate_is_the_limit(db) -> None:
    org = bucket("org", per_minute=600, burst_seconds=1)  # 10 per second, 10 at once

    # One request every 50 ms (20/s) for 10 s: 10 of the burst + 10/s over 10 s.
    answers = [admitted(org, at=i * 0.05) for i in range(200)]

    assert sum(answers) == pytest.approx(110, abs=1)


def test_refused_requests_do_not_use_up_the_bucket(db) -> None:
    org = bucket("org", per_minute=60, burst_seconds=1)
    take(org)
    for _ in range(100):
        take(org, at=0.5)  # hammering while refused

    assert admitted(org, at=1.0)


def test_a_rate_whose_steps_do_not_divide_a_second_admits_its_whole_burst(db) -> None:
    org = bucket("org", per_minute=7, burst_seconds=60)  # 60/7 s, stored to the microsecond

    assert [admitted(org) for _ in range(8)] == [True] * 7 + [False]


def test_a_request_refused_by_one_bucket_charges_none(db) -> None:
    org = bucket("org", per_minute=60, burst_seconds=2)
    key = bucket("key", per_minute=60, burst_seconds=1)

    assert admitted(org, key)
    verdicts = take(org, key)  # the key's one request is spent; the organisation has one left

    assert [v.refused for v in verdicts] == [False, True]
    assert admitted(org)  # its second request was not charged by the refusal


def test_a_request_of_cost_n_uses_n_requests_of_the_burst(db) -> None:
    org = bucket("org", per_minute=60, burst_seconds=10)  # 1 per second, 10 at once

    assert admitted(org, cost=7)
    assert not admitted(org, cost=4)  # 7 + 4 > 10, and refused it charges nothing
    assert admitted(org, cost=3)
    [refused] = take(org)

    assert refused.wait_seconds == pytest.approx(1.0)


def test_a_request_worth_more_than_the_burst_waits_for_a_rested_bucket(db) -> None:
    org = bucket("org", per_minute=60, burst_seconds=10)
    take(org)

    [early] = take(org, cost=15)
    rested = admitted(org, cost=15, at=1.0)
    [after] = take(org, at=1.0)

    assert early.wait_seconds == pytest.approx(1.0)  # until the one request has drained
    assert rested
    # 15 taken against a burst of 10: 5 in debt, so the next waits 5 s + its own 1 s
    assert after.wait_seconds == pytest.approx(6.0)


def test_verdicts_come_in_the_order_asked(db) -> None:
    first, second = bucket("a", per_minute=60), bucket("b", per_minute=60)

    verdicts = take(second, first)

    assert [v.bucket for v in verdicts] == [second, first]


def test_no_buckets_no_statement() -> None:
    # Needs no database: nothing is counted when every limit is off.
    assert store.take(None, []) == []  # type: ignore[arg-type]


def test_concurrent_requests_are_each_counted_once(db) -> None:
    org = bucket("org", per_minute=60, burst_seconds=50)  # 50 at once

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: admitted(org, at=0.0), range(80)))

    assert sum(answers) == 50
