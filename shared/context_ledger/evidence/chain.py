"""The HMAC-chained evidence log: append, verify, checkpoint.

Entry ``n`` of a chain carries ``mac_n = HMAC-SHA256(key, mac_(n-1) ‖ n as 8-byte big-endian ‖
record_n)`` with ``mac_0`` = 32 zero bytes, and ``record_n`` the canonical encoding (RFC 8785) of
the stored record. Changing, removing or reordering an entry breaks every MAC from it on, and only
a holder of the key can compute new ones.

The stored record is the caller's record plus the envelope fields ``chain``, ``category``,
``recordId``, ``orgId`` and ``appendedAt``. The MAC covers the record bytes only, so without the
envelope the columns readers select by (an attribution's organisation, the time range of the
compliance listing) could be edited undetected; verification checks that the columns still equal
the envelope. Entries written before ``appendedAt`` joined the envelope have no such field, and
their ``created_at`` is not checked.

Appends to one chain are serialised by the ``evidence_chain_heads`` row, locked for the rest of
the caller's transaction: concurrent writers queue, the chain never forks, and whatever else the
transaction writes (the attribution lookup row) commits or rolls back with the entry.
"""

from __future__ import annotations

import hmac
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from context_ledger.evidence.canonical import canonical_bytes, format_timestamp
from context_ledger.evidence.keys import KeyRing

GENESIS_MAC = bytes(32)

_CHAIN_NAME = re.compile(r"^[\w.:-]{1,200}$")


class ChainError(RuntimeError):
    """The chain refused an operation: bad arguments, no transaction, an unverified checkpoint."""


class RecordConflictError(ChainError):
    """The record id is already in the evidence chain with a different record."""


@dataclass(frozen=True)
class AppendResult:
    seq: int
    mac: bytes
    created: bool


@dataclass(frozen=True)
class Checkpoint:
    """A chain position: the seq and mac of an entry."""

    chain: str
    seq: int
    mac: bytes


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of a verification.

    ``verified_head`` is the last entry the run proved good, to checkpoint; None when the run
    failed or the chain is empty.
    """

    chain: str
    ok: bool
    checked: int
    first_bad_seq: int | None = None
    reason: str | None = None
    verified_head: Checkpoint | None = None


def org_chain(org_id: uuid.UUID) -> str:
    """The name of an organisation's chain (one chain per tenant, see attribution.writer)."""
    return f"org:{org_id}"


def org_id_of_chain(chain: str) -> uuid.UUID | None:
    """The organisation whose chain ``chain`` is, or None for a chain of no organisation."""
    prefix, _, rest = chain.partition(":")
    if prefix != "org":
        return None
    try:
        return uuid.UUID(rest)
    except ValueError:
        return None


def entry_mac(key: bytes, *, prev_mac: bytes, seq: int, record: bytes) -> bytes:
    return hmac.digest(key, prev_mac + seq.to_bytes(8, "big") + record, "sha256")


def encode_entry(
    *,
    chain: str,
    category: str,
    record_id: uuid.UUID,
    org_id: uuid.UUID | None,
    record: dict,
    appended_at: datetime | None = None,
) -> bytes:
    """The bytes stored and MACed for ``record``: canonical JSON with the envelope fields.

    ``appended_at`` (the entry's ``created_at``) is left out only to check that a record is
    encodable before it is appended.
    """
    envelope = {
        "chain": chain,
        "category": category,
        "recordId": str(record_id),
        "orgId": None if org_id is None else str(org_id),
    }
    if "appendedAt" in record:
        raise ChainError("record field 'appendedAt' is reserved")
    if appended_at is not None:
        envelope["appendedAt"] = format_timestamp(appended_at)
    for name, value in envelope.items():
        if name in record and record[name] != value:
            raise ChainError(f"record field {name!r} is reserved and differs from the entry's")
    return canonical_bytes({**record, **envelope})


def decode_record(data: bytes) -> dict[str, Any]:
    """The stored record (with its envelope fields) as a dict."""
    return json.loads(data.decode())  # canonical records are UTF-8: skip json's sniffing


# Creates a new chain's head and locks an existing one in one statement: DO UPDATE takes the row
# lock, waiting for any writer that holds it, and returns the head as that writer committed it.
_LOCK_HEAD = """
INSERT INTO evidence_chain_heads AS head (chain, seq, mac)
VALUES (%(chain)s, 0, %(genesis)s)
ON CONFLICT (chain) DO UPDATE SET seq = head.seq
RETURNING seq, mac
"""

# One statement inserts the entry and advances the head; a record id that is already stored
# (redelivery, or a racing transaction that committed first) inserts nothing and moves nothing.
_INSERT_ENTRY = """
WITH entry AS (
    INSERT INTO evidence_chain (chain, seq, record_id, category, org_id, record, key_id,
                                prev_mac, mac, created_at)
    VALUES (%(chain)s, %(seq)s, %(record_id)s, %(category)s, %(org_id)s, %(record)s, %(key_id)s,
            %(prev_mac)s, %(mac)s, %(created_at)s)
    ON CONFLICT (record_id) DO NOTHING
    RETURNING chain, seq, mac
)
UPDATE evidence_chain_heads AS head SET seq = entry.seq, mac = entry.mac
FROM entry
WHERE head.chain = entry.chain
RETURNING entry.seq
"""

_FIND_RECORD = """
SELECT seq, record, mac FROM evidence_chain WHERE record_id = %(record_id)s
"""


def append(
    conn: psycopg.Connection,
    *,
    chain: str,
    category: str,
    record_id: uuid.UUID,
    org_id: uuid.UUID | None,
    record: dict,
    keys: KeyRing,
) -> AppendResult:
    """Append ``record`` to ``chain`` inside the caller's transaction.

    Idempotent on ``record_id``: appending a record id again returns the stored entry with
    ``created=False``; the same record id with another record raises RecordConflictError.
    """
    if conn.autocommit:
        raise ChainError("append needs a transaction to hold the chain lock until commit")
    if not _CHAIN_NAME.fullmatch(chain):
        raise ChainError("a chain name is 1 to 200 characters of letters, digits, '_.:-'")
    if not category:
        raise ChainError("an entry needs a category")
    # Microseconds, like timestamptz: the column round-trips to the envelope's string exactly.
    appended_at = datetime.now(UTC)
    data = encode_entry(
        chain=chain,
        category=category,
        record_id=record_id,
        org_id=org_id,
        record=record,
        appended_at=appended_at,
    )
    head = conn.execute(_LOCK_HEAD, {"chain": chain, "genesis": GENESIS_MAC}).fetchone()
    seq = head["seq"] + 1
    mac = entry_mac(keys.current_key, prev_mac=head["mac"], seq=seq, record=data)
    inserted = conn.execute(
        _INSERT_ENTRY,
        {
            "chain": chain,
            "seq": seq,
            "record_id": record_id,
            "category": category,
            "org_id": org_id,
            "record": data,
            "key_id": keys.current_key_id,
            "prev_mac": head["mac"],
            "mac": mac,
            "created_at": appended_at,
        },
    ).fetchone()
    if inserted is not None:
        return AppendResult(seq=seq, mac=mac, created=True)
    existing = conn.execute(_FIND_RECORD, {"record_id": record_id}).fetchone()
    if _content(bytes(existing["record"])) != _content(data):
        raise RecordConflictError(f"record {record_id} is already in the chain with other content")
    return AppendResult(seq=existing["seq"], mac=bytes(existing["mac"]), created=False)


def _content(data: bytes) -> dict[str, Any]:
    """A stored record without its append time: what a redelivery must repeat exactly."""
    record = decode_record(data)
    record.pop("appendedAt", None)
    return record


# One statement, one snapshot: the head and the existence of entries are read consistently, so a
# chain whose first entry commits meanwhile is never taken for a chain without a head.
_READ_HEAD = """
SELECT head.seq, head.mac,
       EXISTS (SELECT 1 FROM evidence_chain WHERE chain = %(chain)s) AS has_entries
FROM (VALUES (1)) AS one
LEFT JOIN evidence_chain_heads AS head ON head.chain = %(chain)s
"""
_ENTRY_MAC = "SELECT mac FROM evidence_chain WHERE chain = %(chain)s AND seq = %(seq)s"
_ENTRIES = """
SELECT seq, record_id, category, org_id, record, key_id, prev_mac, mac, created_at
FROM evidence_chain
WHERE chain = %(chain)s AND seq > %(after)s AND seq <= %(until)s
ORDER BY seq
"""


def mac_at(conn: psycopg.Connection, *, chain: str, seq: int) -> bytes | None:
    """The MAC of entry ``seq`` of ``chain``, or None without such an entry."""
    row = conn.execute(_ENTRY_MAC, {"chain": chain, "seq": seq}).fetchone()
    return None if row is None else bytes(row["mac"])


def verify(
    conn: psycopg.Connection,
    *,
    chain: str,
    keys: KeyRing,
    from_seq: int = 1,
    batch: int = 1000,
    reload_keys: Callable[[], KeyRing] | None = None,
) -> VerifyResult:
    """Recompute every MAC of ``chain`` from ``from_seq`` to the head, fetching ``batch`` at a time.

    Checks seq contiguity (no gap, no duplicate), the ``prev_mac`` link, the key id, the MAC, the
    envelope against the columns, and that the last entry is the head (so a removed tail is
    noticed). Entries before ``from_seq`` are trusted as stored: start from 1 for a full check.
    The head is read first, so entries appended meanwhile wait for the next run. ``reload_keys``
    is called once, when a key id is unknown (a rotation newer than the cached ring).

    The entries are read through one server-side cursor rather than pages keyed on seq: a page
    boundary would hide a second row with the seq that ended the previous page.
    """
    if from_seq < 1 or batch < 1:
        raise ValueError("from_seq and batch must be positive")
    head = conn.execute(_READ_HEAD, {"chain": chain}).fetchone()
    if head["seq"] is None:
        if head["has_entries"]:
            return VerifyResult(chain, False, 0, 1, "the chain has entries but no head")
        return VerifyResult(chain, True, 0)
    head_seq, head_mac = head["seq"], bytes(head["mac"])
    prev_seq, prev_mac = from_seq - 1, GENESIS_MAC
    if prev_seq > 0:
        row = conn.execute(_ENTRY_MAC, {"chain": chain, "seq": prev_seq}).fetchone()
        if row is None:
            return VerifyResult(chain, False, 0, prev_seq, MISSING)
        prev_mac = bytes(row["mac"])
    checked = 0
    # WITH HOLD only where there is no transaction to hold the cursor (autocommit).
    with conn.cursor(name="evidence_verify", row_factory=dict_row, withhold=conn.autocommit) as cur:
        cur.itersize = batch
        cur.execute(_ENTRIES, {"chain": chain, "after": prev_seq, "until": head_seq})
        for row in cur:
            if row["seq"] == prev_seq:
                return VerifyResult(chain, False, checked - 1, prev_seq, DUPLICATE)
            problem = _check_entry(chain, row, seq=prev_seq + 1, prev_mac=prev_mac, keys=keys)
            if problem == UNKNOWN_KEY and reload_keys is not None:
                keys, reload_keys = reload_keys(), None
                problem = _check_entry(chain, row, seq=prev_seq + 1, prev_mac=prev_mac, keys=keys)
            if problem is not None:
                return VerifyResult(chain, False, checked, prev_seq + 1, problem)
            prev_seq, prev_mac = row["seq"], bytes(row["mac"])
            checked += 1
    if prev_seq < head_seq:  # the entries up to the head ran out early
        return VerifyResult(chain, False, checked, prev_seq + 1, MISSING)
    if prev_mac != head_mac:
        reason = f"the last entry does not match the chain head (seq {head_seq})"
        return VerifyResult(chain, False, checked, head_seq, reason)
    verified_head = Checkpoint(chain, head_seq, head_mac) if head_seq else None
    return VerifyResult(chain, True, checked, verified_head=verified_head)


# Why an entry fails verification (VerifyResult.reason).
MISSING = "entry is missing"
DUPLICATE = "duplicate sequence"
UNLINKED = "prev_mac does not link to the previous entry"
UNKNOWN_KEY = "the entry's key id is unknown"
MAC_MISMATCH = "mac mismatch"
COLUMNS_DIFFER = "the entry's columns differ from its record"


def _check_entry(
    chain: str, row: dict[str, Any], *, seq: int, prev_mac: bytes, keys: KeyRing
) -> str | None:
    """Why entry ``seq`` fails verification, or None when it is good."""
    if row["seq"] != seq:
        return MISSING
    if bytes(row["prev_mac"]) != prev_mac:
        return UNLINKED
    key = keys.get(row["key_id"])
    if key is None:
        return UNKNOWN_KEY
    data = bytes(row["record"])
    if not hmac.compare_digest(entry_mac(key, prev_mac=prev_mac, seq=seq, record=data), row["mac"]):
        return MAC_MISMATCH
    envelope = decode_record(data)
    columns = {
        "chain": chain,
        "category": row["category"],
        "recordId": str(row["record_id"]),
        "orgId": None if row["org_id"] is None else str(row["org_id"]),
    }
    if "appendedAt" in envelope:  # entries older than this envelope field lack it
        columns["appendedAt"] = format_timestamp(row["created_at"])
    if any(envelope.get(name) != value for name, value in columns.items()):
        return COLUMNS_DIFFER
    return None


def authentic_record(
    row: dict[str, Any], *, keys: KeyRing, reload_keys: Callable[[], KeyRing] | None = None
) -> dict[str, Any] | None:
    """The stored record (with its envelope) of one entry read on its own, or None when the
    entry is not what a key holder wrote.

    ``row`` holds the entry's columns (``chain``, ``seq``, ``record_id``, ``category``,
    ``org_id``, ``record``, ``key_id``, ``prev_mac``, ``mac``, ``created_at``). Without its
    neighbours the link to the previous entry cannot be checked, but the MAC covers the row's own
    ``prev_mac``, seq and record bytes, and the envelope the columns: no one without the key can
    make a row that passes, so a reader that serves only what this returns serves evidence.
    """
    prev_mac = bytes(row["prev_mac"])
    problem = _check_entry(row["chain"], row, seq=row["seq"], prev_mac=prev_mac, keys=keys)
    if problem == UNKNOWN_KEY and reload_keys is not None:
        problem = _check_entry(
            row["chain"], row, seq=row["seq"], prev_mac=prev_mac, keys=reload_keys()
        )
    return None if problem is not None else decode_record(bytes(row["record"]))


_LATEST_CHECKPOINT = """
SELECT chain, seq, mac FROM evidence_checkpoints
WHERE chain = %(chain)s
ORDER BY seq DESC
LIMIT 1
"""

_INSERT_CHECKPOINT = """
INSERT INTO evidence_checkpoints (chain, seq, mac)
VALUES (%(chain)s, %(seq)s, %(mac)s)
ON CONFLICT (chain, seq) DO NOTHING
"""


def latest_checkpoint(conn: psycopg.Connection, *, chain: str) -> Checkpoint | None:
    row = conn.execute(_LATEST_CHECKPOINT, {"chain": chain}).fetchone()
    return None if row is None else Checkpoint(row["chain"], row["seq"], bytes(row["mac"]))


def checkpoint(conn: psycopg.Connection, *, verified: VerifyResult) -> Checkpoint | None:
    """Record where a successful verification ended, so the next one starts there.

    Takes the result rather than reading the head: entries appended after the verification read
    its head are never checkpointed unverified. An empty chain has nothing to record.
    """
    if not verified.ok:
        raise ChainError("only a successful verification can be checkpointed")
    point = verified.verified_head
    if point is not None:
        conn.execute(_INSERT_CHECKPOINT, {"chain": point.chain, "seq": point.seq, "mac": point.mac})
    return point


def verify_from_checkpoint(
    conn: psycopg.Connection,
    *,
    chain: str,
    keys: KeyRing,
    point: Checkpoint | None,
    batch: int = 1000,
    reload_keys: Callable[[], KeyRing] | None = None,
) -> VerifyResult:
    """Verify the entries after ``point`` (from seq 1 without one), once the entry at ``point``
    still has its MAC.

    ``point`` must come from somewhere the database cannot edit (a signed checkpoint of a
    verification, evidence.verify_job): the entries before it are trusted as stored.
    """
    from_seq = 1
    if point is not None:
        row = conn.execute(_ENTRY_MAC, {"chain": chain, "seq": point.seq}).fetchone()
        if row is None or not hmac.compare_digest(row["mac"], point.mac):
            reason = "the checkpointed entry is missing or its mac changed"
            return VerifyResult(chain, False, 0, point.seq, reason)
        from_seq = point.seq + 1
    return verify(
        conn, chain=chain, keys=keys, from_seq=from_seq, batch=batch, reload_keys=reload_keys
    )
