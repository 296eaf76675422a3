"""Endpoint locality: loopback and listed hosts are in the deployment; the explicit setting wins."""

from __future__ import annotations

import pytest

from context_ledger.embeddings.locality import locality
from context_ledger.settings import load_settings


def test_no_endpoint_is_locality_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEYSTONE_CONTEXT_EMBEDDINGS_URL", raising=False)

    assert locality(load_settings()) == "none"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8089/v1",
        "http://localhost:8080/v1",
        "http://[::1]:8080/v1",
        "https://embed.internal/v1",
    ],
)
def test_loopback_and_listed_hosts_are_in_deployment(url: str) -> None:
    settings = load_settings(
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="m",
        KEYSTONE_CONTEXT_EMBEDDINGS_URL=url,
        KEYSTONE_CONTEXT_EMBEDDINGS_INTERNAL_HOSTS="embed.internal",
    )

    assert locality(settings) == "in_deployment"


def test_any_other_host_is_external() -> None:
    settings = load_settings(
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="m",
        KEYSTONE_CONTEXT_EMBEDDINGS_URL="https://api.openai.com/v1",
    )

    assert locality(settings) == "external"


def test_external_false_makes_any_host_in_deployment() -> None:
    settings = load_settings(
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="m",
        KEYSTONE_CONTEXT_EMBEDDINGS_URL="https://embeddings.example.com/v1",
        KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL="false",
    )

    assert locality(settings) == "in_deployment"


def test_external_true_makes_even_a_loopback_proxy_external() -> None:
    settings = load_settings(
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="m",
        KEYSTONE_CONTEXT_EMBEDDINGS_URL="http://127.0.0.1:4000/v1",
        KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL="true",
    )

    assert locality(settings) == "external"
