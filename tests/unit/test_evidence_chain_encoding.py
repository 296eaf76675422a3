"""The MAC of an entry and the envelope that binds its columns to its record."""

from __future__ import annotations

import hashlib
import hmac
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from context_ledger.evidence.chain import (
    GENESIS_MAC,
    ChainError,
    decode_record,
    encode_entry,
    entry_mac,
    org_chain,
)

KEY = b"k" * 32
RECORD_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")
ORG_ID = uuid.UUID("00000000-0000-4000-8000-0000000000aa")


def test_the_mac_covers_prev_mac_then_seq_as_8_bytes_big_endian_then_the_record() -> None:
    record = b'{"a":1}'
    expected = hmac.new(
        KEY, GENESIS_MAC + b"\x00\x00\x00\x00\x00\x00\x01\x02" + record, hashlib.sha256
    ).digest()

    assert entry_mac(KEY, prev_mac=GENESIS_MAC, seq=258, record=record) == expected
    assert bytes(32) == GENESIS_MAC


def test_the_stored_record_carries_the_envelope_in_canonical_form() -> None:
    data = encode_entry(
        chain=org_chain(ORG_ID),
        category="context_attribution",
        record_id=RECORD_ID,
        org_id=ORG_ID,
        record={"requestId": "r-1"},
    )

    assert data == (
        b'{"category":"context_attribution","chain":"org:00000000-0000-4000-8000-0000000000aa",'
        b'"orgId":"00000000-0000-4000-8000-0000000000aa",'
        b'"recordId":"00000000-0000-4000-8000-000000000001","requestId":"r-1"}'
    )
    assert decode_record(data)["requestId"] == "r-1"


def test_an_entry_without_organisation_records_a_null_org_id() -> None:
    data = encode_entry(chain="main", category="c", record_id=RECORD_ID, org_id=None, record={})

    assert decode_record(data)["orgId"] is None


def test_a_record_may_repeat_an_envelope_field_with_the_same_value() -> None:
    data = encode_entry(
        chain="main",
        category="c",
        record_id=RECORD_ID,
        org_id=ORG_ID,
        record={"orgId": str(ORG_ID)},
    )

    assert decode_record(data)["orgId"] == str(ORG_ID)


def test_a_record_cannot_override_an_envelope_field() -> None:
    with pytest.raises(ChainError, match="'orgId' is reserved"):
        encode_entry(
            chain="main",
            category="c",
            record_id=RECORD_ID,
            org_id=ORG_ID,
            record={"orgId": str(uuid.uuid4())},
        )


def test_the_append_time_joins_the_envelope_in_utc_microseconds() -> None:
    appended_at = datetime(2026, 1, 31, 10, 30, 0, 123456, tzinfo=timezone(timedelta(hours=1)))

    data = encode_entry(
        chain="main",
        category="c",
        record_id=RECORD_ID,
        org_id=None,
        record={},
        appended_at=appended_at,
    )

    assert decode_record(data)["appendedAt"] == "2026-01-31T09:30:00.123456Z"


def test_a_record_can_never_carry_its_own_append_time() -> None:
    with pytest.raises(ChainError, match="'appendedAt' is reserved"):
        encode_entry(
            chain="main",
            category="c",
            record_id=RECORD_ID,
            org_id=None,
            record={"appendedAt": "2026-01-31T09:30:00.000000Z"},
        )
