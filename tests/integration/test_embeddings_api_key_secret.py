"""The embeddings API key from Secrets Manager (moto's server): sent as a bearer key, kept for
max_age, re-read after rotation, and a secret that cannot be read is a 503 that sends nothing."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from context_ledger.aws_secrets import SecretKey
from context_ledger.embeddings.client import EmbeddingsClient, EmbeddingsUnavailableError
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings


@pytest.fixture
def secrets(sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A Secrets Manager client on moto's server (the one serving SQS)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sqs_endpoint)
    return boto3.client("secretsmanager")


@pytest.fixture
def stand_in() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 8) as running:
        yield running


def authorizations(stand_in: StandInEmbeddingsServer) -> list[str | None]:
    return [request.headers.get("Authorization") for request in stand_in.requests]


def test_the_key_is_read_from_the_secret_and_kept_for_max_age(secrets, stand_in) -> None:
    arn = secrets.create_secret(Name=f"emb-{uuid.uuid4()}", SecretString="key-one\n")["ARN"]
    client = EmbeddingsClient(stand_in.url, "stand-in", api_key=SecretKey(None, arn, max_age=300))

    client.embed(["first"])
    secrets.put_secret_value(SecretId=arn, SecretString="key-two")
    client.embed(["cached for max_age"])

    assert authorizations(stand_in) == ["Bearer key-one", "Bearer key-one"]
    client.close()


def test_a_rotated_key_is_picked_up_after_max_age(secrets, stand_in) -> None:
    arn = secrets.create_secret(Name=f"emb-{uuid.uuid4()}", SecretString="key-one\n")["ARN"]
    client = EmbeddingsClient(stand_in.url, "stand-in", api_key=SecretKey(None, arn, max_age=1))

    client.embed(["first"])
    secrets.put_secret_value(SecretId=arn, SecretString="key-two")
    time.sleep(1.2)  # past max_age however long the calls took
    client.embed(["after rotation"])

    assert authorizations(stand_in) == ["Bearer key-one", "Bearer key-two"]
    client.close()


def test_a_secret_that_cannot_be_read_is_a_503_and_nothing_is_sent(secrets, stand_in) -> None:
    missing = f"arn:aws:secretsmanager:us-east-1:123456789012:secret:none-{uuid.uuid4()}"
    client = EmbeddingsClient(stand_in.url, "stand-in", api_key=SecretKey(None, missing))

    with pytest.raises(EmbeddingsUnavailableError, match="API key could not be read"):
        client.embed(["never sent"])

    assert stand_in.requests == []
    client.close()
