"""Chains checked against their external checkpoints: what a chain cannot see on its own."""

from __future__ import annotations

import json
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
from context_ledger.evidence.anchor import (
    INVALID_CHECKPOINT,
    REWRITTEN,
    STORE_ROLLED_BACK,
    STORE_UNAVAILABLE,
    TRUNCATED,
)
from context_ledger.evidence.chain import append, org_chain
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
from context_ledger.evidence.verify_job import ChainVerification, verify_all_chains, verify_chain
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


@pytest.fixture
def add(db: str, keys: KeyRing) -> Callable[[int], None]:
    def run(n: int) -> None:
        with psycopg.connect(db, row_factory=dict_row) as conn:
            for i in range(n):
                append(
                    conn,
                    chain=CHAIN,
                    category="test",
                    record_id=uuid.uuid4(),
                    org_id=ORG,
                    record={"n": i},
                    keys=keys,
                )
                conn.commit()

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

    def latest(self, chain: str) -> SignedCheckpoint | None:
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


def test_the_writer_checkpoints_every_n_appends_after_its_commit(
    db: str, keys: KeyRing, store: FileCheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEYSTONE_EVIDENCE_CHECKPOINT_EVERY", "4")
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

    assert seen == [None, None, None, 4, 4, 4, 4, 8, 8]
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
    assert keys == [object_name(CHAIN, 10), object_name(CHAIN, 6)]
