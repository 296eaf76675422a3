"""The key ring: key ids to keys of at least 32 bytes, a current key, and the secret formats."""

from __future__ import annotations

import json

import pytest

from context_ledger.evidence.keys import KeyRing, KeyRingError, load_key_ring, parse_secret
from context_ledger.settings import load_settings

KEY_1 = b"k1-" + b"a" * 32
KEY_2 = b"k2-" + b"b" * 32


def test_a_key_shorter_than_32_bytes_is_refused() -> None:
    with pytest.raises(KeyRingError, match="shorter than 32 bytes"):
        KeyRing.single("k1", b"x" * 31)


def test_the_current_key_id_must_have_a_key() -> None:
    with pytest.raises(KeyRingError, match="current key id 'k2' has no key"):
        KeyRing(current_key_id="k2", keys={"k1": KEY_1})


def test_a_key_id_outside_the_allowed_characters_is_refused() -> None:
    with pytest.raises(KeyRingError, match="key id"):
        KeyRing.single("k 1", KEY_1)


def test_the_ring_finds_old_keys_and_appends_with_the_current_one() -> None:
    ring = KeyRing(current_key_id="k2", keys={"k1": KEY_1, "k2": KEY_2})

    assert (ring.current_key_id, ring.current_key) == ("k2", KEY_2)
    assert ring.get("k1") == KEY_1
    assert ring.get("k3") is None


def test_keys_never_appear_in_the_ring_repr() -> None:
    assert "aaaa" not in repr(KeyRing.single("k1", KEY_1))


def test_the_ring_cannot_be_changed_after_it_is_built() -> None:
    ring = KeyRing.single("k1", KEY_1)

    with pytest.raises(TypeError):
        ring.keys["k9"] = KEY_2  # type: ignore[index]


def test_a_raw_secret_is_the_key_under_the_configured_key_id() -> None:
    assert parse_secret(KEY_1.decode() + "\n", default_key_id="local-1") == ("local-1", KEY_1)


def test_a_json_secret_names_its_key_id() -> None:
    secret = json.dumps({"keyId": "evidence-2025-01", "key": KEY_2.decode()})

    assert parse_secret(secret, default_key_id="local-1") == ("evidence-2025-01", KEY_2)


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        ('{"keyId": "k1", "key": ', "does not parse"),
        (json.dumps({"key": KEY_1.decode()}), "must be"),
        (json.dumps({"keyId": 1, "key": KEY_1.decode()}), "must be"),
        ('{"keyId": "k1", "key": "short"}', "shorter than 32 bytes"),
        ("short", "shorter than 32 bytes"),
    ],
    ids=["broken-json", "no-key-id", "numeric-key-id", "short-json-key", "short-raw-key"],
)
def test_malformed_secrets_are_refused(secret: str, message: str) -> None:
    with pytest.raises(KeyRingError, match=message):
        parse_secret(secret, default_key_id="local-1")


def test_the_local_key_comes_from_the_settings() -> None:
    settings = load_settings(
        KEYSTONE_EVIDENCE_HMAC_KEY=KEY_1.decode(), KEYSTONE_EVIDENCE_KEY_ID="dev-7"
    )

    ring = load_key_ring(settings)

    assert (ring.current_key_id, ring.current_key) == ("dev-7", KEY_1)


def test_a_short_local_key_is_refused_naming_the_variable() -> None:
    settings = load_settings(KEYSTONE_EVIDENCE_HMAC_KEY="change-me")

    with pytest.raises(KeyRingError, match=r"KEYSTONE_EVIDENCE_HMAC_KEY: .*shorter than 32"):
        load_key_ring(settings)


def test_no_configured_key_is_refused_naming_both_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KEYSTONE_EVIDENCE_HMAC_KEY", raising=False)
    monkeypatch.delenv("KEYSTONE_EVIDENCE_HMAC_SECRET_ARN", raising=False)

    with pytest.raises(KeyRingError, match="SECRET_ARN or KEYSTONE_EVIDENCE_HMAC_KEY"):
        load_key_ring(load_settings())
