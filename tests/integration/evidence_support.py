"""The evidence key ring as the service builds it from its environment, for integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from context_ledger.evidence.keys import KeyRing, clear_key_ring_cache, get_key_ring
from context_ledger.settings import get_settings


@contextmanager
def key_ring_from_env(
    monkeypatch: pytest.MonkeyPatch, **variables: str | None
) -> Iterator[KeyRing]:
    """Set the variables (None unsets one) and yield the service's key ring; afterwards restore
    the environment and forget the cached settings and key ring on both sides."""
    for name, value in variables.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    clear_key_ring_cache()
    try:
        yield get_key_ring()
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
        clear_key_ring_cache()


@contextmanager
def local_key_ring(
    monkeypatch: pytest.MonkeyPatch, *, database_url: str, home: str, key: str
) -> Iterator[KeyRing]:
    """Local-mode settings over the test database with the HMAC key ``key``; every variable
    ``prepare_local().apply()`` (the CLI) sets is restored after."""
    with key_ring_from_env(
        monkeypatch,
        KEYSTONE_ENVIRONMENT="local",
        CONTEXT_LEDGER_HOME=home,
        DATABASE_URL=database_url,
        KEYSTONE_AUTH_JWKS_URL="http://127.0.0.1:1/jwks.json",
        KEYSTONE_EVIDENCE_HMAC_KEY=key,
        KEYSTONE_EVIDENCE_HMAC_SECRET_ARN=None,
    ) as ring:
        yield ring
