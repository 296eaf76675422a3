"""An organisation's evidence for auditors: the compliance-evidence listing.

It reads one chain, ``org:<orgId>``, so an organisation never sees another's entries.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from context_ledger.evidence.chain import decode_record

#: Fields the chain adds to every stored record (see evidence.chain); a reader is shown the record
#: as its writer gave it, with the envelope values in their own response fields.
ENVELOPE_FIELDS = frozenset({"chain", "category", "recordId", "orgId", "appendedAt"})

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


class InvalidCursorError(ValueError):
    """A compliance-evidence cursor that this service did not hand out."""


def published_record(data: bytes) -> dict[str, Any]:
    """The stored record without its envelope fields: the record as its writer published it."""
    return {k: v for k, v in decode_record(data).items() if k not in ENVELOPE_FIELDS}


@dataclass(frozen=True)
class Position:
    """Where a page ended: the last entry's (created_at, seq), newest-first order."""

    created_at: datetime
    seq: int

    def encode(self) -> str:
        raw = json.dumps([self.created_at.isoformat(), self.seq]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, cursor: str) -> Position:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            created_at, seq = json.loads(raw)
            position = cls(datetime.fromisoformat(created_at), int(seq))
        except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
            raise InvalidCursorError("cursor is not one this service returned") from None
        if position.created_at.tzinfo is None or isinstance(seq, bool) or position.seq < 1:
            raise InvalidCursorError("cursor is not one this service returned")
        return position


@dataclass(frozen=True)
class EvidenceEntry:
    seq: int
    category: str
    created_at: datetime
    record_id: uuid.UUID
    record: dict[str, Any]


@dataclass(frozen=True)
class EvidencePage:
    entries: list[EvidenceEntry]
    next_position: Position | None


# Optional filters are NULL when unset, so the statement stays one constant. The subject filter
# reads the record's userId (context_attribution records carry it; link records do not).
_ENTRIES = """
SELECT seq, category, created_at, record_id, record
FROM evidence_chain
WHERE chain = %(chain)s
  AND (%(category)s::text IS NULL OR category = %(category)s)
  AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
  AND (%(until)s::timestamptz IS NULL OR created_at < %(until)s)
  AND (%(subject_user)s::text IS NULL
       OR convert_from(record, 'UTF8')::jsonb ->> 'userId' = %(subject_user)s)
  AND (%(after_created_at)s::timestamptz IS NULL
       OR (created_at, seq) < (%(after_created_at)s, %(after_seq)s))
ORDER BY created_at DESC, seq DESC
LIMIT %(limit)s
"""


def list_evidence(
    conn: psycopg.Connection,
    *,
    chain: str,
    category: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    subject_user: str | None = None,
    limit: int = DEFAULT_LIMIT,
    after: Position | None = None,
) -> EvidencePage:
    """One page of ``chain``'s entries, newest first; ``since`` inclusive, ``until`` exclusive."""
    limit = max(1, min(limit, MAX_LIMIT))
    rows = conn.execute(
        _ENTRIES,
        {
            "chain": chain,
            "category": category,
            "since": since,
            "until": until,
            "subject_user": subject_user,
            "after_created_at": None if after is None else after.created_at,
            "after_seq": None if after is None else after.seq,
            "limit": limit + 1,
        },
    ).fetchall()
    entries = [
        EvidenceEntry(
            seq=row["seq"],
            category=row["category"],
            created_at=row["created_at"],
            record_id=row["record_id"],
            record=published_record(bytes(row["record"])),
        )
        for row in rows[:limit]
    ]
    more = len(rows) > limit
    last = entries[-1] if more else None
    return EvidencePage(
        entries=entries,
        next_position=None if last is None else Position(last.created_at, last.seq),
    )
