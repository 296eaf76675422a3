"""Counting a request against its buckets: one statement over ``rate_buckets``.

A bucket's row holds its theoretical arrival time (TAT). Admitting a request moves the TAT to
``max(TAT, now) + emission``; the request is admitted when that stays within ``tolerance`` (the
burst) of now, and otherwise may retry after the excess. All or nothing: a request refused by one
bucket charges none, so a key over its own limit does not use up its organisation's, and a
refused request costs its caller nothing but the wait.

The statement locks the buckets' existing rows in key order (concurrent requests of one
organisation queue on its row for the length of this statement only), decides, and writes only
when every bucket admits. Two first-ever requests of one key can both be decided against an empty
bucket; the conflict clause still adds both emissions, so only that first decision is lenient.

The statement turns ``synchronous_commit`` off for its own transaction: its commit does not wait
for the WAL flush (5-8 ms at p50 on the development machine, 0.6 without), and a crash can only
lose the last few counts, forgiving a few requests. So run it in a transaction of its own (the
HTTP dependency runs it in autocommit), or last in the pipeline of reads that only count on it
(the retrieve use case, whose one possible write, a personal space created on first use, is
created again if a crash loses it), never inside one whose writes must be durable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg

from context_ledger.db.pending import Pending, send
from context_ledger.ratelimit.buckets import Bucket

#: Timestamps are stored to the microsecond: a TAT that exceeds the burst by less than this is
#: rounding (60/7 s steps, for one), not an excess.
SLACK_SECONDS = 0.001

_TAKE = """
WITH relaxed AS (
    SELECT set_config('synchronous_commit', 'off', true)
), clock AS (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now FROM relaxed
), wanted AS (
    SELECT w.key_sha256, w.emission, w.tolerance
    FROM unnest(%(keys)s::bytea[], %(emissions)s::float8[], %(tolerances)s::float8[])
        AS w(key_sha256, emission, tolerance)
), held AS (
    SELECT b.key_sha256, b.tat
    FROM rate_buckets b
    WHERE b.key_sha256 = ANY (%(keys)s::bytea[])
    ORDER BY b.key_sha256
    FOR UPDATE
), decided AS (
    SELECT w.key_sha256,
           w.emission,
           greatest(h.tat, c.now) + make_interval(secs => w.emission) AS tat,
           extract(epoch FROM greatest(h.tat, c.now) - c.now)::float8
               + w.emission - w.tolerance AS wait
    FROM wanted w CROSS JOIN clock c LEFT JOIN held h USING (key_sha256)
), charged AS (
    INSERT INTO rate_buckets AS b (key_sha256, tat)
    SELECT key_sha256, tat FROM decided
    WHERE NOT EXISTS (SELECT FROM decided WHERE wait > %(slack)s)
    ORDER BY key_sha256
    ON CONFLICT (key_sha256) DO UPDATE
    SET tat = greatest(b.tat, (SELECT now FROM clock)) + make_interval(
        secs => (SELECT d.emission FROM decided d WHERE d.key_sha256 = b.key_sha256)
    )
)
SELECT key_sha256, wait FROM decided
"""


@dataclass(frozen=True)
class Verdict:
    """One bucket's answer: ``wait_seconds`` > 0 means refused until that much later."""

    bucket: Bucket
    wait_seconds: float

    @property
    def refused(self) -> bool:
        return self.wait_seconds > SLACK_SECONDS


def take(
    conn: psycopg.Connection,
    buckets: Sequence[Bucket],
    *,
    cost: int = 1,
    now: datetime | None = None,
) -> list[Verdict]:
    """Count one request, ``cost`` times, against ``buckets`` (at most one per key) at ``now``
    (default: the database's clock); each bucket's verdict, in the order given. Charged only if
    none refuses."""
    return pending_take(conn, buckets, cost=cost, now=now).result()


def pending_take(
    conn: psycopg.Connection,
    buckets: Sequence[Bucket],
    *,
    cost: int = 1,
    now: datetime | None = None,
) -> Pending[list[Verdict]]:
    """:func:`take`, sent now and read later (db/pending.py). In a pipeline, send it last: the
    buckets' rows stay locked until the pipeline's transaction commits at its Sync."""
    if not buckets:
        return Pending(list)
    charges = [b.charge(cost) for b in buckets]
    params = {
        "now": now,
        "keys": [b.key for b in buckets],
        "emissions": [emission for emission, _ in charges],
        "tolerances": [tolerance for _, tolerance in charges],
        "slack": SLACK_SECONDS,
    }

    def verdicts(cursor: psycopg.Cursor) -> list[Verdict]:
        waits = {bytes(row["key_sha256"]): float(row["wait"]) for row in cursor.fetchall()}
        return [Verdict(bucket=b, wait_seconds=waits[b.key]) for b in buckets]

    return send(conn, _TAKE, params, verdicts)
