"""SecretKey over Powertools' parameters utility and moto's Secrets Manager (the session's moto
server): a key given directly wins, a secret's is read stripped, kept for max_age, then read
again, and a secret that cannot be read raises to the caller."""

from __future__ import annotations

import time
import uuid
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from context_ledger.aws_secrets import SecretKey


@pytest.fixture
def secrets(sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A Secrets Manager client on moto's server (the one serving SQS)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sqs_endpoint)
    return boto3.client("secretsmanager")


def new_secret(secrets: Any, value: str) -> str:
    """A secret of its own per test: Powertools' cache is keyed by the secret's name."""
    return secrets.create_secret(Name=f"key-{uuid.uuid4()}", SecretString=value)["ARN"]


def missing_arn() -> str:
    return f"arn:aws:secretsmanager:us-east-1:123456789012:secret:none-{uuid.uuid4()}"


def test_a_direct_value_wins_and_no_secret_is_read(secrets) -> None:
    # The secret does not exist: reading it would raise.
    assert SecretKey("direct", missing_arn())() == "direct"


def test_nothing_configured_is_no_key() -> None:
    assert SecretKey(None, None)() is None


def test_a_secret_key_reads_the_current_version_stripped(secrets) -> None:
    arn = new_secret(secrets, "v1")
    secrets.put_secret_value(SecretId=arn, SecretString=" v2\n")

    assert SecretKey(None, arn)() == "v2"


def test_a_key_read_from_a_secret_is_kept_for_max_age(secrets) -> None:
    arn = new_secret(secrets, "k1")
    key = SecretKey(None, arn, max_age=300)

    assert key() == "k1"
    secrets.put_secret_value(SecretId=arn, SecretString="k2")
    assert key() == "k1"


def test_a_rotated_secret_is_read_again_after_max_age(secrets) -> None:
    arn = new_secret(secrets, "k1")
    key = SecretKey(None, arn, max_age=1)

    assert key() == "k1"
    secrets.put_secret_value(SecretId=arn, SecretString="k2")
    time.sleep(1.2)  # past max_age however long the calls took
    assert key() == "k2"


def test_max_age_zero_reads_the_secret_every_time(secrets) -> None:
    arn = new_secret(secrets, "k1")
    key = SecretKey(None, arn, max_age=0)

    assert key() == "k1"
    secrets.put_secret_value(SecretId=arn, SecretString="k2")
    assert key() == "k2"


def test_an_empty_secret_is_no_key(secrets) -> None:
    assert SecretKey(None, new_secret(secrets, "  "))() is None


def test_a_secret_that_cannot_be_read_raises_every_time(secrets) -> None:
    key = SecretKey(None, missing_arn())

    for _ in range(2):  # a failed read is not kept: the next call tries again
        with pytest.raises(GetParameterError, match="ResourceNotFoundException"):
            key()


def test_repr_never_shows_the_key() -> None:
    assert "direct" not in repr(SecretKey("direct", None))
