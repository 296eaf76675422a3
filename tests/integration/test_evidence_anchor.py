"""Chains checked against their external checkpoints: what a chain cannot see on its own."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import boto3
import psycopg
import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from evidence_support import key_ring_from_env
from psycopg.rows import dict_row

from context_ledger.attribution.writer import record_handler
from context_ledger.evidence import checkpoint_store
from context_ledger.evidence.anchor import (
    INVALID_CHECKPOINT,
    REWRITTEN,
    STORE_ROLLED_BACK,
    STORE_UNAVAILABLE,
    TRUNCATED,
)
from context_ledger.evidence.chain import AppendResult, append, mac_at, org_chain
from context_ledger.evidence.checkpoint_store import (
    APPENDED,
    VERIFIED,
    CheckpointStoreError,
    FileCheckpointStore,
    SignedCheckpoint,
    object_name,
    sign_checkpoint,
)
from context_ledger.evidence.keys import KeyRing
from context_ledger.evidence.verify_job import (
    ChainVerification,
    verify_all_chains,
    verify_chain,
    verify_recent_chains,
)
from context_ledger.settings import get_settings

ORG = uuid.UUID("00000000-0000-4000-8000-0000000000ab")
CHAIN = org_chain(ORG)


@pytest.fixture
def keys(db: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[KeyRing]:
    with key_ring_from_env(
        monkeypatch,
        KEYSTONE_EVIDENCE_HMAC_KEY="anchor-test-key-" + "a" * 32,
        KEYSTONE_EVIDENCE_CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
    ) as ring:
        yield ring


@pytest.fixture
def store(keys: KeyRing, tmp_path: Path) -> FileCheckpointStore:
    return FileCheckpointStore(tmp_path / "checkpoints")


def _append(conn: psycopg.Connection, keys: KeyRing, n: int) -> AppendResult:
    """Append record ``n`` to the test chain and commit it."""
    result = append(
        conn,
        chain=CHAIN,
        category="test",
        record_id=uuid.uuid4(),
        org_id=ORG,
        record={"n": n},
        keys=keys,
    )
    conn.commit()
    return result


@pytest.fixture
def add(db: str, keys: KeyRing) -> Callable[[int], None]:
    def run(n: int) -> None:
        with psycopg.connect(db, row_factory=dict_row) as conn:
            for i in range(n):
                _append(conn, keys, i)

    return run


@pytest.fixture
def check(db: str, keys: KeyRing, store: FileCheckpointStore) -> Callable[..., ChainVerification]:
    def run(**kwargs) -> ChainVerification:
        with psycopg.connect(db, row_factory=dict_row) as conn:
            verified = verify_chain(conn, chain=CHAIN, keys=keys, store=store, **kwargs)
            conn.commit()
        return verified

    return run


def _sql(db: str, sql: str, params: tuple = ()) -> None:
    """Run SQL with the chain's append-only trigger off: what someone with the database can do."""
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")
        try:
            admin.execute(sql, params)
        finally:
            admin.execute("ALTER TABLE evidence_chain ENABLE TRIGGER evidence_chain_no_update")


def _restore_database_to(db: str, seq: int) -> None:
    """The database as a backup taken at ``seq`` left it: chain, head and checkpoints together."""
    _sql(db, "DELETE FROM evidence_chain WHERE chain = %s AND seq > %s", (CHAIN, seq))
    _sql(db, "DELETE FROM evidence_checkpoints WHERE chain = %s AND seq > %s", (CHAIN, seq))
    _sql(
        db,
        "UPDATE evidence_chain_heads AS h SET seq = e.seq, mac = e.mac FROM evidence_chain AS e"
        " WHERE h.chain = %s AND e.chain = h.chain AND e.seq = %s",
        (CHAIN, seq),
    )


def _outcome(verified: ChainVerification) -> tuple:
    result = verified.result
    return result.ok, result.first_bad_seq, result.reason


def test_a_verified_run_checkpoints_outside_the_database_then_inside(
    add: Callable, check: Callable, store: FileCheckpointStore, keys: KeyRing
) -> None:
    add(10)

    verified = check()

    assert _outcome(verified) == (True, None, None)
    external = store.latest(CHAIN)
    assert external is not None
    assert (external.seq, external.kind, external.key_id) == (10, VERIFIED, keys.current_key_id)
    assert external.signature_valid(keys)
    assert verified.checkpoint is not None
    assert verified.checkpoint.seq == 10
    add(3)
    assert _outcome(check()) == (True, None, None)
    assert store.latest(CHAIN).seq == 13


def test_a_cut_tail_with_its_head_moved_back_is_truncation_against_checkpoint(
    db: str, add: Callable, check: Callable
) -> None:
    add(20)
    check()

    _restore_database_to(db, 16)  # the tail 17..20 gone, the head row and checkpoints made to fit

    assert _outcome(check()) == (False, 17, TRUNCATED)
    assert _outcome(check(full=True)) == (False, 17, TRUNCATED)


def test_a_database_restored_from_an_older_backup_is_caught(
    db: str, add: Callable, check: Callable
) -> None:
    add(10)
    check()
    add(5)
    check()

    _restore_database_to(db, 10)

    assert _outcome(check()) == (False, 11, TRUNCATED)
    add(6)  # the restored database takes new appends: seq 15 now holds another entry
    assert _outcome(check()) == (False, 15, REWRITTEN)


def test_checkpoints_missing_from_the_store_are_checkpoint_rolled_back(
    add: Callable, check: Callable, store: FileCheckpointStore
) -> None:
    add(10)
    check()
    add(5)
    check()

    (store.directory / object_name(CHAIN, 15)).unlink()

    assert _outcome(check()) == (False, 11, STORE_ROLLED_BACK)


def test_a_forged_external_checkpoint_fails_verification(
    add: Callable, check: Callable, store: FileCheckpointStore
) -> None:
    add(3)
    wrong_key = KeyRing.single("anchor-test", b"x" * 32)  # no such key in the ring
    store.put(
        sign_checkpoint(
            chain=CHAIN, seq=9, mac=bytes(32), kind=VERIFIED, keys=wrong_key, now=datetime.now(UTC)
        )
    )

    assert _outcome(check()) == (False, None, INVALID_CHECKPOINT)


def test_a_garbled_external_checkpoint_fails_verification(
    add: Callable, check: Callable, store: FileCheckpointStore
) -> None:
    add(3)
    check()
    (store.directory / object_name(CHAIN, 3)).write_bytes(b"{not json")

    assert _outcome(check()) == (False, None, INVALID_CHECKPOINT)


def test_an_internal_failure_before_the_checkpoint_is_reported_first(
    db: str, add: Callable, check: Callable
) -> None:
    add(10)
    check()
    _restore_database_to(db, 8)
    _sql(db, "DELETE FROM evidence_chain WHERE chain = %s AND seq = 4", (CHAIN,))

    assert _outcome(check(full=True)) == (False, 4, "entry is missing")


class _BrokenStore:
    def __init__(self, *, reads: bool) -> None:
        self.reads = reads

    def latest(self, chain: str, *, verified: bool = False) -> SignedCheckpoint | None:
        if not self.reads:
            raise CheckpointStoreError("cannot read checkpoint: AccessDenied")
        return None

    def put(self, checkpoint: SignedCheckpoint) -> None:
        raise CheckpointStoreError("cannot write checkpoint: AccessDenied")

    def chains(self) -> list[str]:
        return []


def test_an_unreadable_store_fails_the_run_and_checkpoints_nothing(
    db: str, add: Callable, keys: KeyRing
) -> None:
    add(4)
    with psycopg.connect(db, row_factory=dict_row) as conn:
        verified = verify_chain(conn, chain=CHAIN, keys=keys, store=_BrokenStore(reads=False))

    assert _outcome(verified) == (False, None, STORE_UNAVAILABLE)
    assert verified.checkpoint is None


def test_a_store_that_refuses_the_write_leaves_the_table_without_a_checkpoint(
    db: str, add: Callable, keys: KeyRing
) -> None:
    """The table never gets ahead of the store, or the next run would cry rollback."""
    add(4)
    with psycopg.connect(db, row_factory=dict_row) as conn:
        verified = verify_chain(conn, chain=CHAIN, keys=keys, store=_BrokenStore(reads=True))

    assert _outcome(verified) == (True, None, None)
    assert verified.checkpoint is None


def test_a_chain_only_the_store_remembers_is_verified_and_fails(
    db: str, add: Callable, check: Callable
) -> None:
    add(5)
    check()
    _sql(db, "DELETE FROM evidence_chain WHERE chain = %s", (CHAIN,))
    _sql(db, "DELETE FROM evidence_chain_heads WHERE chain = %s", (CHAIN,))
    _sql(db, "DELETE FROM evidence_checkpoints WHERE chain = %s", (CHAIN,))

    summary = verify_all_chains()

    assert summary["failures"] == [
        {"chain": CHAIN, "checked": 0, "firstBadSeq": 1, "reason": TRUNCATED}
    ]


def test_the_writer_checkpoints_its_first_append_then_every_n_appends_after_its_commit(
    db: str, keys: KeyRing, store: FileCheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_EVERY", "4")
    monkeypatch.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS", "3600")
    monkeypatch.setattr(checkpoint_store, "_last_written", {})  # a new process
    get_settings.cache_clear()
    with psycopg.connect(db) as conn:
        org_id = conn.execute("INSERT INTO organisations (name) VALUES ('W') RETURNING id")
        org_id = org_id.fetchone()[0]
    seen: list[int | None] = []
    for i in range(9):
        body = {
            "recordId": str(uuid.uuid4()),
            "category": "context_attribution",
            "orgId": str(org_id),
            "record": {"requestId": f"r-{i}", "attributionId": str(uuid.uuid4()), "userId": "u"},
        }
        record_handler(SQSRecord({"messageId": str(i), "body": json.dumps(body)}))
        latest = store.latest(org_chain(org_id))
        seen.append(None if latest is None else latest.seq)

    assert seen == [1, 1, 1, 4, 4, 4, 4, 8, 8]
    assert store.latest(org_chain(org_id)).kind == APPENDED


def test_the_daily_job_against_a_bucket_catches_a_restored_database(
    db: str, add: Callable, sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployed configuration: KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET, S3 on moto's server."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", sqs_endpoint)
    monkeypatch.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_BUCKET", f"ckpt-{uuid.uuid4().hex[:12]}")
    get_settings.cache_clear()
    bucket = get_settings().evidence_checkpoint_bucket
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    add(6)
    assert verify_all_chains()["ok"]
    add(4)
    assert verify_all_chains()["ok"]

    _restore_database_to(db, 6)

    assert verify_all_chains()["failures"] == [
        {"chain": CHAIN, "checked": 0, "firstBadSeq": 7, "reason": TRUNCATED}
    ]
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys == [
        object_name(CHAIN, 10),
        object_name(CHAIN, 6),
        object_name(CHAIN, 10, verified=True),
        object_name(CHAIN, 6, verified=True),
    ]


# --- a cut tail (issue: checkpoints came only every 1,000 appends) ------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


def _cut_tail(db: str, keep: int) -> None:
    """Delete the newest entries and move the head back: all the database's own checks pass."""
    _sql(db, "DELETE FROM evidence_chain WHERE chain = %s AND seq > %s", (CHAIN, keep))
    _sql(
        db,
        "UPDATE evidence_chain_heads AS h SET seq = e.seq, mac = e.mac FROM evidence_chain AS e"
        " WHERE h.chain = %s AND e.chain = h.chain AND e.seq = %s",
        (CHAIN, keep),
    )


def _mac_at(db: str, seq: int) -> bytes | None:
    with psycopg.connect(db, row_factory=dict_row) as conn:
        return mac_at(conn, chain=CHAIN, seq=seq)


def _append_as_the_writer(db: str, keys: KeyRing, store: FileCheckpointStore, n: int) -> None:
    """Appends followed by the writer's checkpoint rule, as record_handler runs it."""
    for i in range(n):
        with psycopg.connect(db, row_factory=dict_row) as conn:
            result = _append(conn, keys, i)
        checkpoint_store.checkpoint_if_due(
            chain=CHAIN,
            seq=result.seq,
            mac=result.mac,
            keys=keys,
            store=store,
            mac_at=lambda seq: _mac_at(db, seq),
        )


def test_the_writer_checkpoints_a_chain_it_has_not_checkpointed_for_the_interval(
    keys: KeyRing, store: FileCheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS", "60")
    monkeypatch.setattr(checkpoint_store, "_last_written", {})
    get_settings.cache_clear()
    clock = iter([1000.0, 1010.0, 1059.0, 1060.5, 1061.0])
    written = [
        checkpoint_store.checkpoint_if_due(
            chain=CHAIN,
            seq=seq,
            mac=bytes(32),
            keys=keys,
            store=store,
            now=lambda: next(clock),
            mac_at=lambda seq: bytes(32),  # the chain these checkpoints stand for
        )
        for seq in (1, 2, 3, 4, 5)
    ]

    assert written == [True, False, False, True, False]
    assert store.latest(CHAIN).seq == 4


def test_a_refused_append_checkpoint_is_tried_again_at_the_next_append(
    keys: KeyRing, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_store, "_last_written", {})
    broken = _BrokenStore(reads=True)

    assert not checkpoint_store.checkpoint_if_due(
        chain=CHAIN, seq=1, mac=bytes(32), keys=keys, store=broken, mac_at=lambda seq: None
    )
    assert CHAIN not in checkpoint_store._last_written


def test_a_cut_tail_older_than_the_interval_is_caught_and_never_checkpointed(
    db: str, keys: KeyRing, store: FileCheckpointStore, check: Callable, monkeypatch
) -> None:
    """The reported attack: appends, a verification, more appends, then the newest entries
    deleted and the head moved back. Every verification now calls it truncation."""
    monkeypatch.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS", "1")
    monkeypatch.setattr(checkpoint_store, "_last_written", {})
    get_settings.cache_clear()
    _append_as_the_writer(db, keys, store, 5)
    assert check().result.ok
    time.sleep(1.1)  # the interval passes: the next append is checkpointed by the writer
    _append_as_the_writer(db, keys, store, 3)
    assert store.latest(CHAIN).seq == 6

    _cut_tail(db, keep=5)
    incremental, full = check(), check(full=True)

    assert _outcome(incremental) == (False, 6, TRUNCATED)
    assert _outcome(full) == (False, 6, TRUNCATED)
    assert store.latest(CHAIN).seq == 6, "the cut chain was not checkpointed"
    assert incremental.checkpoint.seq == 5


def test_a_forged_checkpoint_row_does_not_shorten_the_incremental_walk(
    db: str, add: Callable, check: Callable, keys: KeyRing, store: FileCheckpointStore
) -> None:
    """The database's checkpoint table is writable by whoever edits entries: a row claiming the
    head was verified must not let a changed entry before it pass, even where the writer's
    (unverified) checkpoint of that head agrees with the row."""
    add(3)
    assert check().result.ok
    add(4)
    with psycopg.connect(db, row_factory=dict_row) as conn:
        head = conn.execute("SELECT seq, mac FROM evidence_chain_heads").fetchone()
    store.put(
        sign_checkpoint(
            chain=CHAIN, seq=7, mac=bytes(head["mac"]), kind=APPENDED, keys=keys, now=_now()
        )
    )
    _sql(db, "UPDATE evidence_chain SET record = set_byte(record, 3, 32) WHERE seq = 5")
    _sql(
        db,
        "INSERT INTO evidence_checkpoints (chain, seq, mac)"
        " SELECT chain, seq, mac FROM evidence_chain WHERE chain = %s AND seq = 7",
        (CHAIN,),
    )

    # Against the store's verification checkpoints, the table claims a run nobody signed.
    assert _outcome(check()) == (False, 4, STORE_ROLLED_BACK)
    assert store.latest(CHAIN, verified=True).seq == 3
    assert _outcome(check(full=True)) == (False, 5, "mac mismatch")


def test_the_sweep_checkpoints_the_last_append_before_a_quiet_spell(
    db: str, keys: KeyRing, store: FileCheckpointStore, monkeypatch
) -> None:
    monkeypatch.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS", "3600")
    monkeypatch.setattr(checkpoint_store, "_last_written", {})
    get_settings.cache_clear()
    _append_as_the_writer(db, keys, store, 4)
    assert store.latest(CHAIN).seq == 1  # the writer's first; the rest wait

    assert verify_recent_chains()["ok"]

    assert (store.latest(CHAIN).seq, store.latest(CHAIN, verified=True).seq) == (4, 4)
    _cut_tail(db, keep=2)
    assert verify_recent_chains()["failures"] == [
        {"chain": CHAIN, "checked": 0, "firstBadSeq": 3, "reason": TRUNCATED}
    ]


def test_a_cut_tail_refilled_by_new_appends_stays_caught(
    db: str, keys: KeyRing, store: FileCheckpointStore, check: Callable, monkeypatch
) -> None:
    """The probe's attack: after the cut the service goes on appending, so new entries take the
    cut seqs. The writer must not checkpoint the new head (it would become the newest checkpoint
    and hide the cut): the chain stays failed until someone looks."""
    monkeypatch.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS", "1")
    monkeypatch.setattr(checkpoint_store, "_last_written", {})
    get_settings.cache_clear()
    _append_as_the_writer(db, keys, store, 5)
    assert check().result.ok  # checkpoint at 5
    _cut_tail(db, keep=2)

    for _ in range(3):  # seq 3, 4, 5 again, then 6: each time the writer is due
        monkeypatch.setattr(checkpoint_store, "_last_written", {})
        _append_as_the_writer(db, keys, store, 1)
    monkeypatch.setattr(checkpoint_store, "_last_written", {})
    _append_as_the_writer(db, keys, store, 1)

    assert store.latest(CHAIN).seq == 5, "no checkpoint of the refilled chain"
    assert _outcome(check()) == (False, 5, REWRITTEN)
    assert _outcome(check(full=True)) == (False, 5, REWRITTEN)
    assert verify_recent_chains()["ok"] is False
