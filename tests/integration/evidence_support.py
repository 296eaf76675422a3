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
