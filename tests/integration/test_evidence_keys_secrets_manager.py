"""The key ring from Secrets Manager (moto's server): current and previous versions, rotation."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest

from context_ledger.evidence.keys import KeyRingError, load_key_ring
from context_ledger.settings import load_settings

RAW_KEY = "r" * 40
KEY_2 = "2" * 40
KEY_3 = "3" * 40


@pytest.fixture
def secrets(sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A Secrets Manager client on moto's server (the one serving SQS).

    botocore names the variable after the service id "Secrets Manager": SECRETS_MANAGER.
    """
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sqs_endpoint)
    return boto3.client("secretsmanager")


def _secret(client: Any, *versions: str) -> str:
    """A secret whose versions are ``versions``, oldest first; the last is AWSCURRENT."""
    arn = client.create_secret(Name=f"evidence-{uuid.uuid4()}", SecretString=versions[0])["ARN"]
    for value in versions[1:]:
        client.put_secret_value(SecretId=arn, SecretString=value)
    return arn


def _ring(arn: str, key_id: str = "k1"):
    settings = load_settings(KEYSTONE_EVIDENCE_HMAC_SECRET_ARN=arn, KEYSTONE_EVIDENCE_KEY_ID=key_id)
    return load_key_ring(settings)


def test_a_raw_secret_is_the_current_key_under_the_configured_id(secrets: Any) -> None:
    ring = _ring(_secret(secrets, RAW_KEY), key_id="k1")

    assert (ring.current_key_id, ring.current_key) == ("k1", RAW_KEY.encode())
    assert set(ring.keys) == {"k1"}


def test_after_rotations_every_previous_key_stays_in_the_ring(secrets: Any) -> None:
    arn = _secret(
        secrets,
        RAW_KEY,
        json.dumps({"keyId": "k2", "key": KEY_2}),
        json.dumps({"keyId": "k3", "key": KEY_3}),
    )

    ring = _ring(arn, key_id="k1")

    assert ring.current_key_id == "k3"
    assert dict(ring.keys) == {"k1": RAW_KEY.encode(), "k2": KEY_2.encode(), "k3": KEY_3.encode()}


def test_a_pending_rotation_version_is_not_in_the_ring(secrets: Any) -> None:
    arn = _secret(secrets, json.dumps({"keyId": "k2", "key": KEY_2}))
    secrets.put_secret_value(
        SecretId=arn,
        SecretString=json.dumps({"keyId": "k3", "key": KEY_3}),
        VersionStages=["AWSPENDING"],
    )

    ring = _ring(arn)

    assert (ring.current_key_id, set(ring.keys)) == ("k2", {"k2"})


def test_an_unusable_previous_version_is_skipped(secrets: Any) -> None:
    arn = _secret(secrets, "too short", json.dumps({"keyId": "k2", "key": KEY_2}))

    assert set(_ring(arn).keys) == {"k2"}


def test_two_raw_versions_with_different_keys_are_refused(secrets: Any) -> None:
    arn = _secret(secrets, RAW_KEY, KEY_2)

    with pytest.raises(KeyRingError, match="claim key id 'k1'"):
        _ring(arn, key_id="k1")


def test_an_unusable_current_version_is_refused(secrets: Any) -> None:
    arn = _secret(secrets, json.dumps({"keyId": "k2", "key": KEY_2}), "too short")

    with pytest.raises(KeyRingError, match="shorter than 32 bytes"):
        _ring(arn)
