"""The gateway without a provider, and the OpenAI paths it forwards to."""

from __future__ import annotations

import pytest

from context_ledger.model_gateway.provider import Endpoint, ProviderUnavailableError, get_provider
from context_ledger.settings import get_settings


def test_without_a_provider_url_the_gateway_is_unavailable(monkeypatch) -> None:
    monkeypatch.delenv("KEYSTONE_MODELS_PROVIDER_URL", raising=False)
    get_settings.cache_clear()
    try:
        with pytest.raises(ProviderUnavailableError, match="no provider"):
            get_provider()
    finally:
        get_settings.cache_clear()


def test_endpoints_map_to_the_openai_paths() -> None:
    assert Endpoint.CHAT_COMPLETIONS.path == "/chat/completions"
    assert Endpoint.EMBEDDINGS.path == "/embeddings"
