"""The security suite's world: one world of two organisations per module (tests/api's fixtures
are per test; the matrix's cells share one), served by the session's local runtime
(tests/conftest.py, shared with the API suite: one process serves one runtime's keys)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_support import empty_database
from security_support import World, build_world, token_maker

from context_ledger.auth.local_keys import LocalKeys, ensure_local_keys
from context_ledger.local.provider_server import serve_provider
from context_ledger.local.runtime import LocalRuntime
from context_ledger.settings import get_settings


@pytest.fixture(scope="module")
def api(runtime: LocalRuntime) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=runtime.url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def world(
    api: httpx.Client,
    database_url: str,
    local_keys: LocalKeys,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[World]:
    """Both organisations, with the model gateway in front of a stand-in provider on loopback
    (the runtime's functions read these settings per request, as a redeployed Lambda would)."""
    foreign_keys = ensure_local_keys(tmp_path_factory.mktemp("foreign-home"))
    with serve_provider() as provider:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("KEYSTONE_MODELS_PROVIDER_URL", provider.url)
            patch.setenv("KEYSTONE_MODELS_CONTEXT_LINK_WAIT_MS", "0")
            get_settings.cache_clear()
            yield build_world(api, token_maker(local_keys), foreign_keys)
        get_settings.cache_clear()
    empty_database(database_url)
