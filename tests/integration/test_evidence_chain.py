"""The evidence chain on a real PostgreSQL: linking, verification, tampering, rotation, races."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg.rows import dict_row

from context_ledger.evidence.chain import (
    GENESIS_MAC,
    ChainError,
    RecordConflictError,
    VerifyResult,
    append,
    checkpoint,
    entry_mac,
    latest_checkpoint,
    verify,
    verify_from_checkpoint,
)
from context_ledger.evidence.keys import KeyRing

CHAIN = "org:00000000-0000-4000-8000-0000000000aa"
ORG_ID = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
K1 = KeyRing.single("k1", b"1" * 32)
K2 = KeyRing(current_key_id="k2", keys={"k1": b"1" * 32, "k2": b"2" * 32})


@pytest.fixture
def conn(db: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db, row_factory=dict_row) as connection:
        yield connection


@pytest.fixture
def tamper(db: str) -> Callable[[str], None]:
    """Run SQL against evidence_chain with its append-only trigger switched off."""

    def run(sql: str) -> None:
        with psycopg.connect(db, autocommit=True) as admin:
            admin.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")
            try:
                admin.execute(sql)
            finally:
                admin.execute("ALTER TABLE evidence_chain ENABLE TRIGGER evidence_chain_no_update")

    return run


def _append(
    conn: psycopg.Connection, n: int, *, keys: KeyRing = K1, chain: str = CHAIN
) -> list[uuid.UUID]:
    record_ids = []
    for i in range(n):
        record_id = uuid.uuid4()
        append(
            conn,
            chain=chain,
            category="test",
            record_id=record_id,
            org_id=ORG_ID,
            record={"n": i, "text": f"entry {i}"},
            keys=keys,
        )
        conn.commit()
        record_ids.append(record_id)
    return record_ids


def _verify(conn: psycopg.Connection, **kwargs) -> VerifyResult:
    result = verify(conn, chain=CHAIN, keys=kwargs.pop("keys", K2), **kwargs)
    conn.rollback()
    return result


def _entries(conn: psycopg.Connection, chain: str = CHAIN) -> list[dict]:
    return conn.execute(
        "SELECT seq, record_id, key_id, record, prev_mac, mac FROM evidence_chain"
        " WHERE chain = %s ORDER BY seq",
        (chain,),
    ).fetchall()


def test_each_entry_macs_the_previous_mac_its_seq_and_its_record(
    conn: psycopg.Connection,
) -> None:
    _append(conn, 3)

    entries = _entries(conn)
    prev = GENESIS_MAC
    for seq, entry in enumerate(entries, start=1):
        assert entry["seq"] == seq
        assert entry["prev_mac"] == prev
        assert entry["mac"] == entry_mac(b"1" * 32, prev_mac=prev, seq=seq, record=entry["record"])
        prev = entry["mac"]
    head = conn.execute("SELECT seq, mac FROM evidence_chain_heads WHERE chain = %s", (CHAIN,))
    assert head.fetchone() == {"seq": 3, "mac": prev}


def test_an_untouched_chain_verifies_in_any_batch_size(conn: psycopg.Connection) -> None:
    _append(conn, 5)

    for batch in (1, 2, 1000):
        result = _verify(conn, batch=batch)
        assert (result.ok, result.checked, result.first_bad_seq) == (True, 5, None)
        assert result.verified_head is not None
        assert result.verified_head.seq == 5


def test_an_unknown_chain_verifies_empty(conn: psycopg.Connection) -> None:
    result = _verify(conn)

    assert (result.ok, result.checked, result.verified_head) == (True, 0, None)


# Five entries, tampered as the id says; the verification must fail at the seq given.
TAMPERING = {
    "changed_record_byte": (
        "UPDATE evidence_chain SET record = set_byte(record, 20, get_byte(record, 20) # 1)"
        " WHERE seq = 3",
        3,
        "mac mismatch",
    ),
    "changed_mac": (
        "UPDATE evidence_chain SET mac = set_byte(mac, 0, get_byte(mac, 0) # 1) WHERE seq = 3",
        3,
        "mac mismatch",
    ),
    "changed_prev_mac": (
        "UPDATE evidence_chain SET prev_mac = set_byte(prev_mac, 0, 1) WHERE seq = 2",
        2,
        "prev_mac does not link",
    ),
    "deleted_entry": ("DELETE FROM evidence_chain WHERE seq = 3", 3, "entry is missing"),
    "reordered_entries": (
        "UPDATE evidence_chain SET seq = seq + 100 WHERE seq IN (3, 4);"
        " UPDATE evidence_chain SET seq = 4 WHERE seq = 103;"
        " UPDATE evidence_chain SET seq = 3 WHERE seq = 104",
        3,
        "prev_mac does not link",
    ),
    "deleted_tail": ("DELETE FROM evidence_chain WHERE seq = 5", 5, "entry is missing"),
    "deleted_head": ("DELETE FROM evidence_chain_heads", 1, "no head"),
    "moved_to_another_organisation": (
        "UPDATE evidence_chain SET org_id = gen_random_uuid() WHERE seq = 4",
        4,
        "columns differ",
    ),
    "changed_category": (
        "UPDATE evidence_chain SET category = 'other' WHERE seq = 2",
        2,
        "columns differ",
    ),
    "changed_key_id": ("UPDATE evidence_chain SET key_id = 'k2' WHERE seq = 1", 1, "mac mismatch"),
}


@pytest.mark.parametrize(("sql", "first_bad_seq", "reason"), TAMPERING.values(), ids=TAMPERING)
def test_tampering_is_detected_at_the_first_bad_entry(
    conn: psycopg.Connection,
    tamper: Callable[[str], None],
    sql: str,
    first_bad_seq: int,
    reason: str,
) -> None:
    _append(conn, 5)

    tamper(sql)

    result = _verify(conn)
    assert (result.ok, result.first_bad_seq) == (False, first_bad_seq)
    assert reason in (result.reason or "")
    assert result.checked == first_bad_seq - 1
    assert result.verified_head is None


def test_tampering_in_one_chain_leaves_other_chains_verifying(
    conn: psycopg.Connection, tamper: Callable[[str], None]
) -> None:
    _append(conn, 2)
    _append(conn, 2, chain="org:other")

    tamper(f"DELETE FROM evidence_chain WHERE chain = '{CHAIN}' AND seq = 1")

    assert not _verify(conn).ok
    assert verify(conn, chain="org:other", keys=K1).ok


def test_entries_under_the_old_and_the_new_key_both_verify_after_rotation(
    conn: psycopg.Connection,
) -> None:
    _append(conn, 2, keys=K1)
    _append(conn, 2, keys=K2)

    assert [e["key_id"] for e in _entries(conn)] == ["k1", "k1", "k2", "k2"]
    assert _verify(conn, keys=K2).ok


def test_an_entry_under_an_unknown_key_id_fails_verification(conn: psycopg.Connection) -> None:
    _append(conn, 1, keys=K1)
    _append(conn, 1, keys=K2)
    only_k2 = KeyRing.single("k2", b"2" * 32)

    result = _verify(conn, keys=only_k2)

    assert (result.ok, result.first_bad_seq, result.reason) == (
        False,
        1,
        "the entry's key id is unknown",
    )


def test_an_unknown_key_id_reloads_the_key_ring_once(conn: psycopg.Connection) -> None:
    _append(conn, 2, keys=K1)
    reloads: list[int] = []

    def reload() -> KeyRing:
        reloads.append(1)
        return K2

    result = _verify(conn, keys=KeyRing.single("k2", b"2" * 32), reload_keys=reload)

    assert result.ok
    assert len(reloads) == 1


def test_the_same_record_id_is_appended_once(conn: psycopg.Connection) -> None:
    record_id = uuid.uuid4()
    args = {
        "chain": CHAIN,
        "category": "test",
        "record_id": record_id,
        "org_id": ORG_ID,
        "record": {"a": 1},
        "keys": K1,
    }

    first = append(conn, **args)
    conn.commit()
    again = append(conn, **args)
    conn.commit()

    assert first.created
    assert not again.created
    assert (again.seq, again.mac) == (first.seq, first.mac)
    assert len(_entries(conn)) == 1
    assert _verify(conn).ok


def test_a_record_id_reused_for_other_content_is_refused(conn: psycopg.Connection) -> None:
    record_id = uuid.uuid4()
    append(
        conn,
        chain=CHAIN,
        category="test",
        record_id=record_id,
        org_id=ORG_ID,
        record={"a": 1},
        keys=K1,
    )
    conn.commit()

    with pytest.raises(RecordConflictError):
        append(
            conn,
            chain=CHAIN,
            category="test",
            record_id=record_id,
            org_id=ORG_ID,
            record={"a": 2},
            keys=K1,
        )
    conn.rollback()
    with pytest.raises(RecordConflictError):
        append(
            conn,
            chain="org:other",
            category="test",
            record_id=record_id,
            org_id=ORG_ID,
            record={"a": 1},
            keys=K1,
        )
    conn.rollback()

    assert len(_entries(conn)) == 1


def test_append_refuses_an_autocommit_connection(db: str) -> None:
    with (
        psycopg.connect(db, autocommit=True, row_factory=dict_row) as conn,
        pytest.raises(ChainError, match="needs a transaction"),
    ):
        append(
            conn,
            chain=CHAIN,
            category="test",
            record_id=uuid.uuid4(),
            org_id=None,
            record={},
            keys=K1,
        )


def test_concurrent_appends_never_fork_the_chain(db: str, conn: psycopg.Connection) -> None:
    threads, per_thread = 8, 25
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with psycopg.connect(db, row_factory=dict_row) as own:
                start.wait()
                _append(own, per_thread)
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    entries = _entries(conn)
    assert [e["seq"] for e in entries] == list(range(1, threads * per_thread + 1))
    assert len({e["record_id"] for e in entries}) == threads * per_thread
    result = _verify(conn)
    assert (result.ok, result.checked) == (True, threads * per_thread)


def test_two_transactions_racing_one_record_id_leave_one_entry(
    db: str, conn: psycopg.Connection
) -> None:
    args = {
        "chain": CHAIN,
        "category": "test",
        "record_id": uuid.uuid4(),
        "org_id": ORG_ID,
        "record": {"a": 1},
        "keys": K1,
    }
    _append(conn, 1)  # the chain head exists, so the second writer queues on its lock
    outcome: list = []

    def second_writer() -> None:
        with psycopg.connect(db, row_factory=dict_row) as other:
            outcome.append(append(other, **args))
            other.commit()

    first = append(conn, **args)  # holds the head lock until commit
    racer = threading.Thread(target=second_writer)
    racer.start()
    _wait_for_a_lock_waiter(db)
    conn.commit()
    racer.join()

    assert first.created
    assert not outcome[0].created
    assert outcome[0].seq == first.seq == 2
    assert len(_entries(conn)) == 2
    assert _verify(conn).ok


def _wait_for_a_lock_waiter(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as watcher:
        for _ in range(200):
            waiting = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()[0]
            if waiting:
                return
            time.sleep(0.01)
    raise AssertionError("the second writer never waited on the chain lock")


def test_a_checkpoint_lets_verification_start_after_it(conn: psycopg.Connection) -> None:
    _append(conn, 5)
    point = checkpoint(conn, verified=_verify(conn))
    conn.commit()
    _append(conn, 3)

    result = verify_from_checkpoint(conn, chain=CHAIN, keys=K1, point=point)

    assert point is not None
    assert point.seq == 5
    assert latest_checkpoint(conn, chain=CHAIN) == point
    assert (result.ok, result.checked) == (True, 3)
    assert result.verified_head is not None
    assert result.verified_head.seq == 8


def test_a_changed_checkpointed_entry_fails_verification_from_the_checkpoint(
    conn: psycopg.Connection, tamper: Callable[[str], None]
) -> None:
    _append(conn, 5)
    checkpoint(conn, verified=_verify(conn))
    conn.commit()

    tamper("UPDATE evidence_chain SET mac = set_byte(mac, 0, get_byte(mac, 0) # 1) WHERE seq = 5")

    point = latest_checkpoint(conn, chain=CHAIN)
    result = verify_from_checkpoint(conn, chain=CHAIN, keys=K1, point=point)
    assert (result.ok, result.first_bad_seq) == (False, 5)


def test_only_a_successful_verification_is_checkpointed(
    conn: psycopg.Connection, tamper: Callable[[str], None]
) -> None:
    _append(conn, 2)
    tamper("DELETE FROM evidence_chain WHERE seq = 2")

    with pytest.raises(ChainError, match="only a successful verification"):
        checkpoint(conn, verified=_verify(conn))
