"""Tamper campaign: programmatically corrupt a chain of a few thousand entries every way we know
and require each corruption to be caught at the right first bad seq with the right reason.

One chain of 3,000 entries (the key rotates at seq 1,501) is built once, checkpointed inside and
outside the database at 2,000 and 3,000, and every corruption is applied in a transaction that is
rolled back after the verification: each one starts from the clean chain. The test prints
"N corruptions, 0 accepted".
"""

from __future__ import annotations

import random
import secrets
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from context_ledger.evidence.anchor import REWRITTEN, STORE_ROLLED_BACK, TRUNCATED
from context_ledger.evidence.chain import (
    COLUMNS_DIFFER,
    DUPLICATE,
    MAC_MISMATCH,
    MISSING,
    UNKNOWN_KEY,
    UNLINKED,
    append,
    encode_entry,
    entry_mac,
    org_chain,
    verify,
)
from context_ledger.evidence.checkpoint_store import FileCheckpointStore, object_name
from context_ledger.evidence.keys import KeyRing, clear_key_ring_cache
from context_ledger.evidence.verify_job import verify_chain
from context_ledger.settings import get_settings

ORG = uuid.UUID("00000000-0000-4000-8000-0000000000cc")
CHAIN = org_chain(ORG)
LENGTH = 3000
ROTATION = 1501  # first seq under the second key
K1 = KeyRing.single("campaign-1", b"1" * 32)
K2 = KeyRing(current_key_id="campaign-2", keys={"campaign-1": b"1" * 32, "campaign-2": b"2" * 32})
FIELDS = [
    "seq",
    "chain",
    "record_id",
    "category",
    "org_id",
    "record",
    "key_id",
    "prev_mac",
    "mac",
    "created_at",
]


@dataclass(frozen=True)
class Corruption:
    name: str
    apply: Callable[[psycopg.Connection], None]
    first_bad_seq: int
    reason: str


@pytest.fixture
def ring(db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[KeyRing]:
    """K2 is what the service loads (verify reloads the ring on an unknown key id)."""
    monkeypatch.setenv("KEYSTONE_EVIDENCE_HMAC_KEY", "2" * 32)
    monkeypatch.setenv("KEYSTONE_EVIDENCE_KEY_ID", "campaign-2")
    get_settings.cache_clear()
    clear_key_ring_cache()
    yield K2
    monkeypatch.undo()
    get_settings.cache_clear()
    clear_key_ring_cache()


@pytest.fixture
def chain(
    db: str, ring: KeyRing, tmp_path: Path
) -> Iterator[tuple[psycopg.Connection, FileCheckpointStore]]:
    store = FileCheckpointStore(tmp_path / "checkpoints")
    with psycopg.connect(db, row_factory=dict_row) as conn:
        for seq in range(1, LENGTH + 1):
            append(
                conn,
                chain=CHAIN,
                category="context_attribution",
                record_id=uuid.uuid4(),
                org_id=ORG,
                record={"requestId": f"req-{seq}", "userId": f"user-{seq % 17}", "n": seq},
                keys=K1 if seq < ROTATION else K2,
            )
            if seq in (2000, LENGTH):
                conn.commit()
                assert verify_chain(conn, chain=CHAIN, keys=K2, store=store).result.ok
                conn.commit()
        yield conn, store


def _disable_trigger(conn: psycopg.Connection) -> None:
    conn.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")


def _row(conn: psycopg.Connection, seq: int) -> dict:
    return conn.execute(
        "SELECT * FROM evidence_chain WHERE chain = %s AND seq = %s", (CHAIN, seq)
    ).fetchone()


def _set(conn: psycopg.Connection, seq: int, column: str, value: object) -> None:
    conn.execute(
        psycopg.sql.SQL("UPDATE evidence_chain SET {} = %s WHERE chain = %s AND seq = %s").format(
            psycopg.sql.Identifier(column)
        ),
        (value, CHAIN, seq),
    )


def _other_char(text: str, rng: random.Random, alphabet: str) -> str:
    """``text`` with one of its ``alphabet`` characters replaced by another one of them."""
    i = rng.choice([i for i, c in enumerate(text) if c in alphabet])
    replacement = rng.choice([c for c in alphabet if c != text[i]])
    return text[:i] + replacement + text[i + 1 :]


def _flip_byte(data: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1 :]


def _byte_changed(field: str, seq: int, rng: random.Random) -> Corruption:
    """One byte (one character for text, one hex digit for a uuid) of ``field`` in entry ``seq``."""
    hex_digits, name_chars = "0123456789abcdef", "abcdefghijklmnopqrstuvwxyz0123456789-_"
    reason = {
        "seq": MISSING,  # the entry moves out of place: a gap at ``seq``
        "chain": MISSING,  # the entry moves to another chain
        "record_id": COLUMNS_DIFFER,
        "category": COLUMNS_DIFFER,
        "org_id": COLUMNS_DIFFER,
        "record": MAC_MISMATCH,
        "prev_mac": UNLINKED,
        "mac": MAC_MISMATCH,
        "created_at": COLUMNS_DIFFER,
    }.get(field)
    key_id = None
    if field == "key_id":
        current = K1.current_key_id if seq < ROTATION else K2.current_key_id
        key_id = _other_char(current, rng, name_chars)
        reason = MAC_MISMATCH if K2.get(key_id) is not None else UNKNOWN_KEY
    shift = 1 << (8 * rng.randrange(2, 6))  # a seq above the chain's: no key collision
    micros = 1 << (8 * rng.randrange(0, 5))

    def apply(conn: psycopg.Connection) -> None:
        row = _row(conn, seq)
        if field == "seq":
            _set(conn, seq, "seq", seq ^ shift)
        elif field == "created_at":
            conn.execute(
                "UPDATE evidence_chain SET created_at = created_at + %s * interval '1 microsecond'"
                " WHERE chain = %s AND seq = %s",
                (micros, CHAIN, seq),
            )
        elif field in ("record", "prev_mac", "mac"):
            _set(conn, seq, field, _flip_byte(bytes(row[field]), rng))
        elif field in ("record_id", "org_id"):
            _set(conn, seq, field, uuid.UUID(_other_char(str(row[field]), rng, hex_digits)))
        elif field == "key_id":
            _set(conn, seq, field, key_id)
        else:
            _set(conn, seq, field, _other_char(row[field], rng, name_chars))

    return Corruption(f"byte of {field} at {seq}", apply, seq, reason)


def _deleted(seq: int) -> Corruption:
    def apply(conn: psycopg.Connection) -> None:
        conn.execute("DELETE FROM evidence_chain WHERE chain = %s AND seq = %s", (CHAIN, seq))

    return Corruption(f"row {seq} deleted", apply, seq, MISSING)


def _shift_from(conn: psycopg.Connection, seq: int, by: int) -> None:
    """Move entries ``seq``.. up by ``by`` (through a detour: the primary key checks each row)."""
    conn.execute(
        "UPDATE evidence_chain SET seq = seq + 10000000 WHERE chain = %s AND seq >= %s",
        (CHAIN, seq),
    )
    conn.execute(
        "UPDATE evidence_chain SET seq = seq - 10000000 + %s WHERE chain = %s AND seq >= 10000000",
        (by, CHAIN),
    )


def _swapped(seq: int) -> Corruption:
    def apply(conn: psycopg.Connection) -> None:
        conn.execute(
            "UPDATE evidence_chain SET seq = 10000000 WHERE chain = %s AND seq = %s", (CHAIN, seq)
        )
        _set(conn, seq + 1, "seq", seq)
        conn.execute(
            "UPDATE evidence_chain SET seq = %s WHERE chain = %s AND seq = 10000000",
            (seq + 1, CHAIN),
        )

    return Corruption(f"rows {seq} and {seq + 1} swapped", apply, seq, UNLINKED)


def _inserted_without_key(seq: int) -> Corruption:
    """A forged entry at ``seq`` (later ones moved up), linked to its predecessor but MACed
    without the key, and the head moved to fit."""

    def apply(conn: psycopg.Connection) -> None:
        prev_mac = bytes(_row(conn, seq - 1)["mac"]) if seq > 1 else bytes(32)
        _shift_from(conn, seq, 1)
        record_id = uuid.uuid4()
        data = encode_entry(
            chain=CHAIN,
            category="context_attribution",
            record_id=record_id,
            org_id=ORG,
            record={"requestId": "forged", "userId": "mallory"},
        )
        conn.execute(
            "INSERT INTO evidence_chain (chain, seq, record_id, category, org_id, record, key_id,"
            " prev_mac, mac) VALUES (%s, %s, %s, 'context_attribution', %s, %s, %s, %s, %s)",
            (
                CHAIN,
                seq,
                record_id,
                ORG,
                data,
                K2.current_key_id,
                prev_mac,
                secrets.token_bytes(32),
            ),
        )
        _move_head(conn, LENGTH + 1)

    return Corruption(f"row inserted at {seq} without the key", apply, seq, MAC_MISMATCH)


def _duplicated(seq: int) -> Corruption:
    """A second row with ``seq`` (the constraints that forbid it dropped first)."""

    def apply(conn: psycopg.Connection) -> None:
        conn.execute(
            "ALTER TABLE evidence_chain DROP CONSTRAINT evidence_chain_pkey CASCADE,"
            " DROP CONSTRAINT evidence_chain_record_id_key CASCADE"
        )
        conn.execute(
            "INSERT INTO evidence_chain SELECT * FROM evidence_chain WHERE chain = %s AND seq = %s",
            (CHAIN, seq),
        )

    return Corruption(f"duplicate sequence {seq}", apply, seq, DUPLICATE)


def _move_head(conn: psycopg.Connection, seq: int) -> None:
    conn.execute(
        "UPDATE evidence_chain_heads AS h SET seq = e.seq, mac = e.mac FROM evidence_chain AS e"
        " WHERE h.chain = %s AND e.chain = h.chain AND e.seq = %s",
        (CHAIN, seq),
    )


def _restored_to(conn: psycopg.Connection, seq: int) -> None:
    """The database as a backup taken at ``seq`` has it: entries, head and checkpoints."""
    conn.execute("DELETE FROM evidence_chain WHERE chain = %s AND seq > %s", (CHAIN, seq))
    conn.execute("DELETE FROM evidence_checkpoints WHERE chain = %s AND seq > %s", (CHAIN, seq))
    _move_head(conn, seq)


def _tail_cut(k: int) -> Corruption:
    def apply(conn: psycopg.Connection) -> None:
        _restored_to(conn, LENGTH - k)

    return Corruption(f"tail cut by {k}", apply, LENGTH - k + 1, TRUNCATED)


def _rolled_back_and_appended(seq: int, more: int) -> Corruption:
    """Restored to ``seq`` and appended to again, past the external checkpoint at LENGTH."""

    def apply(conn: psycopg.Connection) -> None:
        _restored_to(conn, seq)
        for i in range(more):
            append(
                conn,
                chain=CHAIN,
                category="context_attribution",
                record_id=uuid.uuid4(),
                org_id=ORG,
                record={"requestId": f"after-restore-{i}", "userId": "u"},
                keys=K2,
            )

    return Corruption(f"rolled back to {seq}, {more} appended", apply, LENGTH, REWRITTEN)


def _recomputed(key_id: str, reason: str) -> Corruption:
    """Every MAC recomputed, and the head with them, under a key that is not the chain's."""
    wrong = secrets.token_bytes(32)

    def apply(conn: psycopg.Connection) -> None:
        rows = conn.execute(
            "SELECT seq, record FROM evidence_chain WHERE chain = %s ORDER BY seq", (CHAIN,)
        ).fetchall()
        prev, seqs, prevs, macs = bytes(32), [], [], []
        for row in rows:
            mac = entry_mac(wrong, prev_mac=prev, seq=row["seq"], record=bytes(row["record"]))
            seqs.append(row["seq"])
            prevs.append(prev)
            macs.append(mac)
            prev = mac
        conn.execute(
            "UPDATE evidence_chain AS e SET prev_mac = u.prev_mac, mac = u.mac, key_id = %s"
            " FROM unnest(%s::bigint[], %s::bytea[], %s::bytea[]) AS u(seq, prev_mac, mac)"
            " WHERE e.chain = %s AND e.seq = u.seq",
            (key_id, seqs, prevs, macs, CHAIN),
        )
        _move_head(conn, LENGTH)

    return Corruption(f"recomputed with a wrong key as {key_id}", apply, 1, reason)


def _corruptions(rng: random.Random) -> list[Corruption]:
    edges = [1, 2, ROTATION - 1, ROTATION, LENGTH - 1, LENGTH]
    positions = sorted(set(edges + rng.sample(range(3, LENGTH - 1), 3)))
    corruptions = [_byte_changed(field, seq, rng) for field in FIELDS for seq in positions]
    corruptions += [_deleted(seq) for seq in positions]
    corruptions += [_swapped(seq) for seq in positions if seq < LENGTH]
    corruptions += [_inserted_without_key(seq) for seq in positions]
    corruptions += [_duplicated(seq) for seq in positions]
    corruptions += [_tail_cut(k) for k in (1, 2, 10, 999, 1000, LENGTH - 1)]
    corruptions += [_rolled_back_and_appended(2900, 150), _rolled_back_and_appended(2999, 2)]
    corruptions += [
        _recomputed(K1.current_key_id, MAC_MISMATCH),
        _recomputed("forged", UNKNOWN_KEY),
    ]
    return corruptions


def _outcome(conn: psycopg.Connection, store: FileCheckpointStore, *, full: bool) -> tuple:
    result = verify_chain(conn, chain=CHAIN, keys=K2, store=store, full=full).result
    return result.ok, result.first_bad_seq, result.reason


def test_every_corruption_is_caught_and_a_clean_chain_raises_no_alarm(
    chain: tuple[psycopg.Connection, FileCheckpointStore],
) -> None:
    conn, store = chain
    rng = random.Random(6)
    corruptions = _corruptions(rng)

    accepted, misreported = [], []
    for corruption in corruptions:
        _disable_trigger(conn)
        corruption.apply(conn)
        outcome = _outcome(conn, store, full=True)
        conn.rollback()
        if outcome[0]:
            accepted.append(corruption.name)
        elif outcome[1:] != (corruption.first_bad_seq, corruption.reason):
            misreported.append((corruption.name, outcome[1:]))

    # The checkpoint rolled back: the store lost its newest checkpoint (3,000); the table still
    # has it. Caught on the incremental run too.
    newest = store.directory / object_name(CHAIN, LENGTH)
    saved = newest.read_bytes()
    newest.unlink()
    for full in (False, True):
        outcome = _outcome(conn, store, full=full)
        conn.rollback()
        if outcome[0]:
            accepted.append(f"checkpoint rolled back (full={full})")
        elif outcome[1:] != (2001, STORE_ROLLED_BACK):
            misreported.append(("checkpoint rolled back", outcome[1:]))
    newest.write_bytes(saved)
    total = len(corruptions) + 2

    false_alarms = []
    for full in (True, False):
        if not _outcome(conn, store, full=full)[0]:
            false_alarms.append(f"verify_chain full={full}")
        conn.rollback()
    for batch in (1, 7, 1000, 5000):
        result = verify(conn, chain=CHAIN, keys=K2, batch=batch)
        conn.rollback()
        if not (result.ok and result.checked == LENGTH):
            false_alarms.append(f"verify batch={batch}")

    print(f"{total} corruptions, {len(accepted)} accepted; {len(false_alarms)} false alarms")
    assert accepted == []
    assert misreported == [], misreported
    assert false_alarms == []
    assert total >= 120
