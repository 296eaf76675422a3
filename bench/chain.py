"""Evidence chain throughput: appends through the writer handler, and verification.

Append rows (records/s), each on its own fresh chain:

- ``handler``: ``functions/attribution_writer/app.py``'s ``handler(event, context)``, loaded by
  file path as the local runtime loads it, called with SQS events of 10 records (the template's
  ``BatchSize``) shaped as Lambda delivers them: Powertools batch processing, event validation,
  one transaction per record (head lock, MAC, entry, attribution lookup row), the external
  checkpoint every ``KEYSTONE_EVIDENCE_CHECKPOINT_EVERY`` (1000) appends.
- ``handler, 4 writers``: four threads calling the handler at once, one chain (they queue on the
  chain's head row) and four chains (one per organisation: they do not).
- baselines ``bare INSERT``: the same stored bytes inserted into a table shaped like the chain,
  no lock, no MAC, no validation: the database's floor for the rows, with one transaction per row
  (as the handler commits) and per 10 rows.

Verify rows (records/s) over the chain the single-writer handler row built:

- ``verify``: ``evidence.chain.verify`` from seq 1 (what ``chain/verify?full=true`` runs).
- ``verify_chain`` incremental: the daily job's path with nothing new since the last checkpoint
  (external store read, checkpointed entry, anchor), so its cost is the fixed part of a run.
- baseline ``fetch``: the same rows read through a server-side cursor, nothing checked.
- baseline ``fetch + HMAC``: the rows read and every MAC recomputed, no other check.

    .venv/bin/python bench/chain.py                  # 5,000 records
    .venv/bin/python bench/chain.py --records 20000

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from bench_support import LambdaFunction, load_function, scratch_dir, write_results
from psycopg.rows import dict_row

REPO = Path(__file__).resolve().parents[1]
BATCH = 10
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:bench-attributions"


def attribution_event(org_id: uuid.UUID, n: int) -> dict[str, Any]:
    """An event the size of a retrieval's: five chunks with their hashes and index versions."""
    return {
        "recordId": str(uuid.uuid4()),
        "category": "context_attribution",
        "orgId": str(org_id),
        "record": {
            "requestId": f"bench-{n}",
            "attributionId": str(uuid.uuid4()),
            "userId": f"user-{n % 50}",
            "spaceId": str(uuid.uuid4()),
            "lensId": "",
            "sessionId": f"session-{n % 20}",
            "sourceIds": [str(uuid.uuid4()) for _ in range(2)],
            "chunks": [
                {
                    "chunkId": str(uuid.uuid4()),
                    "sourceId": str(uuid.uuid4()),
                    "sha256": f"{n * 7 + i:064x}",
                    "indexVersion": 3,
                }
                for i in range(5)
            ],
            "client": {"clientId": "bench", "clientName": "editor", "clientVersion": "1.4.2"},
            "deliveredAt": "2026-01-31T09:30:00.000000Z",
        },
    }


def sqs_batches(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from context_ledger.local.events import sqs_record

    records = []
    for event in events:
        body = json.dumps(event, separators=(",", ":"))
        message = {
            "MessageId": str(uuid.uuid4()),
            "ReceiptHandle": uuid.uuid4().hex,
            "Body": body,
            "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1767173400000"},
            "MD5OfBody": "0" * 32,
        }
        records.append(sqs_record(message, queue_arn=QUEUE_ARN, region="us-east-1"))
    return [{"Records": records[i : i + BATCH]} for i in range(0, len(records), BATCH)]


def new_org(url: str, name: str) -> uuid.UUID:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "INSERT INTO organisations (name) VALUES (%s) RETURNING id", (name,)
        ).fetchone()[0]


def run_handler(handler: LambdaFunction, batches: list[dict[str, Any]]) -> None:
    for batch in batches:
        answer = handler(batch)
        if answer["batchItemFailures"]:
            raise RuntimeError(f"the writer failed {answer['batchItemFailures']}")


def time_handler(handler: LambdaFunction, per_thread: list[list[dict[str, Any]]]) -> float:
    errors: list[BaseException] = []

    def work(batches: list[dict[str, Any]]) -> None:
        try:
            run_handler(handler, batches)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(batches,)) for batches in per_thread]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return elapsed


def time_bare_insert(url: str, rows: list[tuple], *, per_transaction: int) -> float:
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE bench_bare (LIKE evidence_chain INCLUDING ALL)")
        conn.commit()
        started = time.perf_counter()
        with conn.cursor() as cur:
            for i in range(0, len(rows), per_transaction):
                cur.executemany(
                    "INSERT INTO bench_bare (chain, seq, record_id, category, org_id, record,"
                    " key_id, prev_mac, mac) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    rows[i : i + per_transaction],
                )
                conn.commit()
        elapsed = time.perf_counter() - started
        conn.execute("DROP TABLE bench_bare")
        conn.commit()
    return elapsed


def stored_rows(url: str, chain: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT 'bare:' || chain, seq, gen_random_uuid(), category, org_id, record, key_id,"
            " prev_mac, mac FROM evidence_chain WHERE chain = %s ORDER BY seq",
            (chain,),
        ).fetchall()


def timed(action: Callable[[], Any], repeat: int) -> float:
    """The best of ``repeat`` runs (the machine is shared: the minimum is the least disturbed)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best


_FETCH = (
    "SELECT seq, record_id, category, org_id, record, key_id, prev_mac, mac, created_at"
    " FROM evidence_chain WHERE chain = %s ORDER BY seq"
)


def fetch_chain(conn: psycopg.Connection, chain: str, keys: Any = None) -> int:
    """The verification baselines: ``chain``'s rows read as ``verify`` reads them (one
    server-side cursor, 1000 at a time), nothing checked; with ``keys``, every MAC recomputed.
    Returns the rows read."""
    from context_ledger.evidence.chain import entry_mac

    count = 0
    with conn.cursor(name="bench_fetch", row_factory=dict_row) as cur:
        cur.itersize = 1000
        cur.execute(_FETCH, (chain,))
        for row in cur:
            count += 1
            if keys is not None:
                key = keys.get(row["key_id"])
                prev_mac, record = row["prev_mac"], row["record"]
                entry_mac(key, prev_mac=prev_mac, seq=row["seq"], record=record)
    conn.rollback()
    return count


def verify_rows(url: str, chain: str, repeat: int) -> list[tuple[str, float]]:
    from context_ledger.evidence.chain import verify
    from context_ledger.evidence.checkpoint_store import get_checkpoint_store
    from context_ledger.evidence.keys import get_key_ring
    from context_ledger.evidence.verify_job import verify_chain

    keys = get_key_ring()
    with psycopg.connect(url, row_factory=dict_row) as conn:

        def full() -> None:
            result = verify(conn, chain=chain, keys=keys)
            conn.rollback()
            if not result.ok:
                raise RuntimeError(f"the bench chain does not verify: {result}")

        def incremental() -> None:
            verified = verify_chain(conn, chain=chain, keys=keys, store=get_checkpoint_store())
            conn.commit()
            if not verified.result.ok:
                raise RuntimeError(f"the bench chain does not verify: {verified.result}")

        incremental()  # the first run checkpoints the head; the timed ones start there
        return [
            ("verify (full)", timed(full, repeat)),
            ("fetch (baseline)", timed(lambda: fetch_chain(conn, chain), repeat)),
            ("fetch + HMAC (baseline)", timed(lambda: fetch_chain(conn, chain, keys), repeat)),
            ("verify_chain, nothing new", timed(incremental, repeat)),
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=5000, help="records per append row")
    parser.add_argument("--repeat", type=int, default=3, help="verify runs per row (best kept)")
    parser.add_argument("--json", type=Path, help="also write the rows here (bench/suite.py)")
    args = parser.parse_args(argv)
    if args.records < 4 * BATCH:
        parser.error(f"--records must be at least {4 * BATCH}")
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ["KEYSTONE_EVIDENCE_HMAC_KEY"] = "bench-chain-key-" + "b" * 32
    os.environ["KEYSTONE_EVIDENCE_CHECKPOINT_DIR"] = str(scratch_dir("ctxl-bench-cp-"))
    os.environ.pop("KEYSTONE_EVIDENCE_HMAC_SECRET_ARN", None)
    os.environ.pop("KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET", None)
    from ingest import scratch_database  # bench/ is the script's folder, first on sys.path

    started = time.perf_counter()
    n = args.records - args.records % (4 * BATCH)
    with scratch_database() as url:
        from context_ledger.evidence.chain import org_chain
        from context_ledger.settings import get_settings

        get_settings.cache_clear()
        handler = load_function("AttributionWriterFunction")
        run_handler(handler, sqs_batches([attribution_event(new_org(url, "warm"), 0)]))

        appends: list[tuple[str, float]] = []
        solo = new_org(url, "solo")
        batches = sqs_batches([attribution_event(solo, i) for i in range(n)])
        appends.append(("handler, 1 writer", time_handler(handler, [batches])))
        shared = new_org(url, "shared")
        batches = sqs_batches([attribution_event(shared, i) for i in range(n)])
        parts = [batches[i::4] for i in range(4)]
        appends.append(("handler, 4 writers, one chain", time_handler(handler, parts)))
        parts = [
            sqs_batches([attribution_event(new_org(url, f"org-{w}"), i) for i in range(n // 4)])
            for w in range(4)
        ]
        appends.append(("handler, 4 writers, 4 chains", time_handler(handler, parts)))
        rows = stored_rows(url, org_chain(solo))
        for size in (1, BATCH):
            seconds = time_bare_insert(url, rows, per_transaction=size)
            appends.append((f"bare INSERT, {size} per commit (baseline)", seconds))
        verifies = verify_rows(url, org_chain(solo), args.repeat)

    print(f"evidence chain, {n:,} records of {len(rows[0][5]):,} bytes each")
    print()
    print(f"{'append':<38}{'seconds':>9}{'records/s':>12}")
    for name, seconds in appends:
        print(f"{name:<38}{seconds:>9.2f}{n / seconds:>12,.0f}")
    print()
    print(f"{'verify':<38}{'seconds':>9}{'records/s':>12}")
    for name, seconds in verifies:
        rate = "—" if name.startswith("verify_chain") else f"{n / seconds:,.0f}"
        print(f"{name:<38}{seconds:>9.3f}{rate:>12}")
    print()
    print(f"total {time.perf_counter() - started:.0f} s")
    write_results(
        args.json,
        {
            "records": n,
            "record_bytes": len(rows[0][5]),
            "appends": [{"name": name, "seconds": s} for name, s in appends],
            "verifies": [{"name": name, "seconds": s} for name, s in verifies],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
