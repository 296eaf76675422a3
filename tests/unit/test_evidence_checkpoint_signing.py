"""Signed checkpoints: what the signature covers, and names that sort newest first."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from context_ledger.evidence.checkpoint_store import (
    VERIFIED,
    InvalidCheckpointError,
    SignedCheckpoint,
    object_name,
    sign_checkpoint,
)
from context_ledger.evidence.keys import KeyRing

K1 = KeyRing.single("k1", b"1" * 32)
K2 = KeyRing(current_key_id="k2", keys={"k1": b"1" * 32, "k2": b"2" * 32})
NOW = datetime(2026, 1, 31, 9, 30, tzinfo=UTC)


def _signed(keys: KeyRing = K1, seq: int = 42) -> SignedCheckpoint:
    return sign_checkpoint(
        chain="org:a", seq=seq, mac=bytes(range(32)), kind=VERIFIED, keys=keys, now=NOW
    )


def test_a_checkpoint_round_trips_through_its_stored_bytes_and_verifies() -> None:
    signed = _signed()

    again = SignedCheckpoint.from_bytes(signed.to_bytes())

    assert again == signed
    assert again.key_id == "k1"
    assert again.created_at == "2026-01-31T09:30:00.000000Z"
    assert again.signature_valid(K1)


@pytest.mark.parametrize(
    "change",
    [
        {"chain": "org:b"},
        {"seq": 43},
        {"mac": bytes(32)},
        {"created_at": "2026-01-31T09:30:00.000001Z"},
        {"kind": "appended"},
        {"key_id": "k2"},
        {"signature": bytes(32)},
    ],
    ids=lambda change: next(iter(change)),
)
def test_changing_any_field_breaks_the_signature(change: dict) -> None:
    forged = dataclasses.replace(_signed(), **change)

    assert not forged.signature_valid(K2)


def test_a_checkpoint_signed_before_a_rotation_verifies_with_the_ring_after_it() -> None:
    assert _signed(K1).signature_valid(K2)
    assert _signed(K2).key_id == "k2"
    assert not _signed(K2).signature_valid(K1)


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b'{"chain": "org:a"}', b'{"chain":"org:a","seq":"1","mac":"zz"}'],
)
def test_bytes_that_are_not_a_checkpoint_are_refused(data: bytes) -> None:
    with pytest.raises(InvalidCheckpointError):
        SignedCheckpoint.from_bytes(data)


def test_a_seq_that_is_not_an_integer_is_refused() -> None:
    stored = _signed().to_bytes().replace(b'"seq":42', b'"seq":true')

    with pytest.raises(InvalidCheckpointError):
        SignedCheckpoint.from_bytes(stored)


def test_object_names_sort_newest_first() -> None:
    seqs = [1, 9, 10, 99, 1000, 2**40, 2**63 - 1]

    names = sorted(object_name("org:a", seq) for seq in seqs)

    assert names == [object_name("org:a", seq) for seq in reversed(seqs)]
    assert object_name("org:a", 7) == "org:a/9223372036854775800-7.json"
    with pytest.raises(ValueError, match="positive bigint"):
        object_name("org:a", 0)
