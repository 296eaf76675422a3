"""Full verification at scale: the daily job's cost for one organisation's chain of 100k and 1M
attribution entries.

The daily run (``evidence.verify_job.verify_all_chains``) verifies every chain from seq 1 and,
beside the walk, checks every ``attributions`` row against its entry
(``attribution.index_check.check_lookup_rows``). ``bench/chain.py`` builds its chain through the
writer handler, a few hundred appends a second; here the chain is built directly:

- **Build.** ``bench/chain.py``'s record shape (``attribution_event``: five chunks, about 1.6 kB
  stored), encoded and MACed in Python by the chain's own ``encode_entry`` and ``entry_mac`` with
  the service's key ring, exactly as ``evidence.chain.append`` would, and bulk-loaded with binary
  ``COPY`` into ``evidence_chain``, its ``evidence_chain_heads`` row and the matching
  ``attributions`` rows, with every index, constraint and trigger in place, a commit per chunk. No
  ``attribution_links`` rows (those come from the gateway). Then ``VACUUM (ANALYZE)``, as
  autovacuum would, and the chain must pass ``verify`` from seq 1 and ``check_lookup_rows`` with
  no problem before anything is timed. The scales grow one chain: 100k entries are measured,
  900k more appended after them, and the 1M entries measured.
- **Rows**, best of ``--repeat`` rounds, the rows interleaved round by round, same data:
  ``verify_chain(full=True, index_check=check_lookup_rows)`` (the daily job's per-chain work,
  external checkpoint store and checkpoint included); the walk alone (``evidence.chain.verify``
  from seq 1); ``check_lookup_rows`` alone; baselines ``fetch`` (the rows through a server-side
  cursor, nothing checked) and ``fetch + HMAC`` (``bench/chain.py``'s two). Each row's peak RSS
  is the process's high-water mark (``VmHWM``, reset before the row through
  ``/proc/self/clear_refs``).
- **Size**: ``pg_total_relation_size`` of ``evidence_chain`` and ``attributions`` (the chain is
  the only one in the scratch database), indexes and TOAST included.

    .venv/bin/python bench/chain_scale.py                              # 100k and 1M entries
    .venv/bin/python bench/chain_scale.py --scale 100000 --repeat 3
    .venv/bin/python bench/chain_scale.py --scale 100000 --explain     # + the index check's plan

1M entries take about 2 GB of disk (check ``df -h``) and, on the shared 2-core machine, about 15
minutes to build. Uses DATABASE_URL when set (on a scratch database it creates and drops), else
embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from bench_support import git_revision, scratch_dir, write_results
from chain import attribution_event, fetch_chain, new_org
from psycopg.rows import dict_row
from tqdm import tqdm

#: Entries per COPY and commit while building.
CHUNK = 10_000

_EVIDENCE_COPY = (
    "COPY evidence_chain (chain, seq, record_id, category, org_id, record, key_id, prev_mac, mac,"
    " created_at) FROM STDIN (FORMAT BINARY)"
)
_EVIDENCE_TYPES = (
    "text", "int8", "uuid", "text", "uuid", "bytea", "text", "bytea", "bytea", "timestamptz",
)  # fmt: skip
_ATTRIBUTIONS_COPY = (
    "COPY attributions (attribution_id, request_id, org_id, user_id, space_id, chain, seq,"
    " created_at) FROM STDIN (FORMAT BINARY)"
)
_ATTRIBUTION_TYPES = ("uuid", "text", "uuid", "text", "uuid", "text", "int8", "timestamptz")
_MOVE_HEAD = """
INSERT INTO evidence_chain_heads (chain, seq, mac) VALUES (%(chain)s, %(seq)s, %(mac)s)
ON CONFLICT (chain) DO UPDATE SET seq = EXCLUDED.seq, mac = EXCLUDED.mac
"""
_SIZE = "SELECT pg_total_relation_size(%s::regclass)"


def build(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    keys: Any,
    head: tuple[int, bytes],
    until: int,
    bar: tqdm,
) -> tuple[int, bytes]:
    """Append entries after ``head`` (seq, mac) until seq ``until``, as ``append`` would write
    them; the new head."""
    from context_ledger.attribution.events import AttributionEvent
    from context_ledger.evidence.chain import encode_entry, entry_mac, org_chain

    chain = org_chain(org_id)
    key, key_id = keys.current_key, keys.current_key_id
    seq, mac = head
    while seq < until:
        entries, lookups = [], []
        for n in range(seq + 1, min(seq + CHUNK, until) + 1):
            event = attribution_event(org_id, n)
            record = event["record"]
            if n == seq + 1:  # the record is what the writer stores, once per chunk
                parsed = AttributionEvent.model_validate(event)
                if parsed.record_data() != record or parsed.chain != chain:
                    raise RuntimeError("the bench record is not what the writer would store")
            record_id = uuid.UUID(event["recordId"])
            appended_at = datetime.now(UTC)
            data = encode_entry(
                chain=chain,
                category=event["category"],
                record_id=record_id,
                org_id=org_id,
                record=record,
                appended_at=appended_at,
            )
            new_mac = entry_mac(key, prev_mac=mac, seq=n, record=data)
            entries.append(
                (chain, n, record_id, event["category"], org_id, data, key_id, mac, new_mac,
                 appended_at)
            )  # fmt: skip
            lookups.append(
                (uuid.UUID(record["attributionId"]), record["requestId"], org_id,
                 record["userId"], uuid.UUID(record["spaceId"]), chain, n, appended_at)
            )  # fmt: skip
            mac = new_mac
        with conn.cursor() as cur:
            for statement, types, rows in (
                (_EVIDENCE_COPY, _EVIDENCE_TYPES, entries),
                (_ATTRIBUTIONS_COPY, _ATTRIBUTION_TYPES, lookups),
            ):
                with cur.copy(statement) as copy:
                    copy.set_types(types)
                    for row in rows:
                        copy.write_row(row)
            seq = entries[-1][1]
            cur.execute(_MOVE_HEAD, {"chain": chain, "seq": seq, "mac": mac})
        conn.commit()
        bar.update(len(entries))
    return seq, mac


def check_valid(conn: psycopg.Connection, *, chain: str, keys: Any) -> int:
    """Refuse a chain the service would not accept: ``verify`` from seq 1 and the lookup rows."""
    from context_ledger.attribution.index_check import check_lookup_rows
    from context_ledger.evidence.chain import verify

    result = verify(conn, chain=chain, keys=keys)
    problems = check_lookup_rows(conn, chain=chain)
    conn.rollback()
    if not result.ok or problems:
        raise RuntimeError(f"the built chain does not verify: {result}, {problems[:3]}")
    return result.checked


def peak_rss_reset() -> bool:
    """Reset the process's peak RSS (Linux ``clear_refs``); False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_mb() -> float:
    """The process's peak RSS since the last reset (``VmHWM``), else since it started."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(
    conn: psycopg.Connection, *, chain: str, keys: Any, repeat: int
) -> list[dict[str, Any]]:
    """The rows, interleaved round by round: the best time of each and its peak RSS."""
    from context_ledger.attribution.index_check import check_lookup_rows
    from context_ledger.evidence.chain import verify
    from context_ledger.evidence.checkpoint_store import get_checkpoint_store
    from context_ledger.evidence.verify_job import verify_chain

    store = get_checkpoint_store()

    def daily() -> int:
        verified = verify_chain(
            conn, chain=chain, keys=keys, full=True, store=store, index_check=check_lookup_rows
        )
        conn.commit()  # the checkpoint, as the daily job's transaction commits it
        if not verified.ok:
            raise RuntimeError(f"the chain does not verify: {verified.reason}")
        return verified.result.checked

    def walk() -> int:
        result = verify(conn, chain=chain, keys=keys)
        conn.rollback()
        if not result.ok:
            raise RuntimeError(f"the chain does not verify: {result}")
        return result.checked

    def index_check() -> int:
        problems = check_lookup_rows(conn, chain=chain)
        conn.rollback()
        if problems:
            raise RuntimeError(f"lookup rows disagree: {problems[:3]}")
        return conn.execute(
            "SELECT count(*) FROM attributions WHERE chain = %s", (chain,)
        ).fetchone()["count"]

    rows: list[tuple[str, Callable[[], int]]] = [
        ("verify_chain(full=True, index_check=check_lookup_rows)", daily),
        ("verify (the walk alone)", walk),
        ("check_lookup_rows alone", index_check),
        ("fetch (baseline)", lambda: fetch_chain(conn, chain)),
        ("fetch + HMAC (baseline)", lambda: fetch_chain(conn, chain, keys)),
    ]
    figures = {
        name: {"name": name, "seconds": float("inf"), "peak_rss_mb": 0.0} for name, _ in rows
    }
    for _ in range(repeat):
        for name, action in rows:
            reset = peak_rss_reset()
            started = time.perf_counter()
            count = action()
            seconds = time.perf_counter() - started
            row = figures[name]
            row["rows"] = count
            row["seconds"] = min(row["seconds"], seconds)
            row["peak_rss_mb"] = max(row["peak_rss_mb"], peak_rss_mb())
            row["peak_rss_since"] = "row" if reset else "process start"
    return list(figures.values())


def explain_index_check(conn: psycopg.Connection, *, chain: str) -> str:
    """The plan of the index check's attributions statement, run (EXPLAIN ANALYZE, BUFFERS,
    VERBOSE for the expressions), without parallel workers as its cursor runs it."""
    from context_ledger.attribution import index_check

    conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
    statement = "EXPLAIN (ANALYZE, BUFFERS, VERBOSE) " + index_check._ATTRIBUTION_ROWS
    plan = conn.execute(statement, {"chain": chain, "from_seq": 1}).fetchall()
    conn.rollback()
    return "\n".join(row["QUERY PLAN"] for row in plan)


def relation_sizes(conn: psycopg.Connection) -> dict[str, int]:
    return {
        table: conn.execute(_SIZE, (table,)).fetchone()["pg_total_relation_size"]
        for table in ("evidence_chain", "attributions")
    }


def print_scale(scale: dict[str, Any]) -> None:
    n, sizes = scale["entries"], scale["bytes"]
    print()
    print(
        f"{n:,} entries of {scale['record_bytes']:,} bytes, one chain (built in"
        f" {scale['build_seconds']:.0f} s, load average {scale['load_average']})"
    )
    print(
        f"size: evidence_chain {sizes['evidence_chain'] / 2**20:,.0f} MiB, attributions"
        f" {sizes['attributions'] / 2**20:,.0f} MiB (pg_total_relation_size)"
    )
    fetch = next(r for r in scale["rows"] if r["name"] == "fetch (baseline)")["seconds"]
    print(f"{'':<56}{'rows':>11}{'seconds':>10}{'records/s':>11}{'vs fetch':>10}{'peak RSS':>10}")
    for row in scale["rows"]:
        print(
            f"{row['name']:<56}{row['rows']:>11,}{row['seconds']:>10.2f}"
            f"{row['rows'] / row['seconds']:>11,.0f}{fetch / row['seconds']:>9.2f}x"
            f"{row['peak_rss_mb']:>7.0f} MiB"
        )
    if scale.get("explain"):
        print()
        print("check_lookup_rows' attributions statement, EXPLAIN (ANALYZE, BUFFERS):")
        print(scale["explain"])


def load_average() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scale", default="100000,1000000", help="chain lengths to measure, comma-separated"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        help="rounds per scale, best kept (default 3 up to 100k entries, 1 beyond)",
    )
    parser.add_argument("--explain", action="store_true", help="print the index check's plan")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    scales = sorted({int(s.replace("_", "")) for s in args.scale.split(",") if s.strip()})
    if not scales or scales[0] < 1:
        parser.error("--scale takes positive integers")
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ["KEYSTONE_EVIDENCE_HMAC_KEY"] = "bench-chain-key-" + "b" * 32
    os.environ["KEYSTONE_EVIDENCE_CHECKPOINT_DIR"] = str(scratch_dir("ctxl-bench-cp-"))
    os.environ.pop("KEYSTONE_EVIDENCE_HMAC_SECRET_ARN", None)
    os.environ.pop("KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET", None)
    from ingest import scratch_database  # bench/ is the script's folder, first on sys.path

    started = time.perf_counter()
    load_start = load_average()
    results: list[dict[str, Any]] = []
    with scratch_database() as url:
        from context_ledger.evidence.chain import GENESIS_MAC, org_chain
        from context_ledger.evidence.keys import get_key_ring
        from context_ledger.settings import get_settings

        get_settings.cache_clear()
        keys = get_key_ring()
        org_id = new_org(url, "chain-scale")
        chain = org_chain(org_id)
        head = (0, GENESIS_MAC)
        with psycopg.connect(url, row_factory=dict_row) as conn:
            for n in scales:
                build_started = time.perf_counter()
                with tqdm(
                    total=n, initial=head[0], desc=f"build {n:,}", unit="entry", mininterval=3
                ) as bar:
                    head = build(conn, org_id=org_id, keys=keys, head=head, until=n, bar=bar)
                with psycopg.connect(url, autocommit=True) as maintenance:
                    maintenance.execute("VACUUM (ANALYZE) evidence_chain, attributions")
                build_seconds = time.perf_counter() - build_started
                checked = check_valid(conn, chain=chain, keys=keys)
                print(
                    f"built {n:,} entries in {build_seconds:.0f} s; verify from seq 1: ok",
                    flush=True,
                )
                record_bytes = conn.execute(
                    "SELECT length(record) FROM evidence_chain WHERE chain = %s AND seq = 1",
                    (chain,),
                ).fetchone()["length"]
                repeat = args.repeat or (3 if n <= 100_000 else 1)
                scale = {
                    "entries": checked,
                    "record_bytes": record_bytes,
                    "build_seconds": build_seconds,
                    "repeat": repeat,
                    "bytes": relation_sizes(conn),
                    "load_average_before": load_average(),
                }
                scale["rows"] = measure(conn, chain=chain, keys=keys, repeat=repeat)
                scale["load_average"] = f"{scale['load_average_before']} → {load_average()}"
                if args.explain:
                    scale["explain"] = explain_index_check(conn, chain=chain)
                results.append(scale)
                print_scale(scale)
    print()
    print(
        f"load average {load_start} → {load_average()}; total {time.perf_counter() - started:.0f} s"
    )
    write_results(
        args.json,
        {
            "command": " ".join(
                ["bench/chain_scale.py", *(argv if argv is not None else sys.argv[1:])]
            ),
            "git": git_revision(),
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "load_average": f"{load_start} → {load_average()}",
            "scales": results,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
