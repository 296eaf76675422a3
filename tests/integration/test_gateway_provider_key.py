"""The provider key from Secrets Manager (moto's server): sent as the provider's bearer key, and a
secret that cannot be read is a 503 that sends nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from context_ledger.local.provider_server import StandInProviderServer, serve_provider
from context_ledger.model_gateway.provider import Endpoint, ProviderUnavailableError, get_provider
from context_ledger.settings import get_settings

BODY = b'{"model": "echo-1", "messages": [{"role": "user", "content": "hi"}]}'


@pytest.fixture
def secrets(sqs_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A Secrets Manager client on moto's server (the one serving SQS)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sqs_endpoint)
    return boto3.client("secretsmanager")


@pytest.fixture
def stand_in() -> Iterator[StandInProviderServer]:
    with serve_provider(api_key="sk-from-secret") as running:
        yield running


@pytest.fixture
def configure(stand_in, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    def configure(secret_arn: str) -> None:
        monkeypatch.setenv("KEYSTONE_MODELS_PROVIDER_URL", stand_in.url)
        monkeypatch.delenv("KEYSTONE_MODELS_PROVIDER_API_KEY", raising=False)
        monkeypatch.setenv("KEYSTONE_MODELS_PROVIDER_KEY_SECRET_ARN", secret_arn)
        get_settings.cache_clear()

    yield configure
    monkeypatch.undo()
    get_settings.cache_clear()


def test_the_provider_key_is_read_from_its_secret(secrets, stand_in, configure) -> None:
    arn = secrets.create_secret(Name=f"provider-{uuid.uuid4()}", SecretString="sk-from-secret\n")
    configure(arn["ARN"])

    answer = get_provider().open(Endpoint.CHAT_COMPLETIONS, BODY)

    assert answer.status == 200
    answer.read()
    assert stand_in.exchanges[0].headers["Authorization"] == "Bearer sk-from-secret"


def test_a_secret_that_cannot_be_read_is_503_and_nothing_is_sent(
    secrets, stand_in, configure
) -> None:
    configure(f"arn:aws:secretsmanager:us-east-1:123456789012:secret:none-{uuid.uuid4()}")

    with pytest.raises(ProviderUnavailableError, match="key could not be read"):
        get_provider().open(Endpoint.CHAT_COMPLETIONS, BODY)

    assert stand_in.exchanges == []
