"""A deployment without a JWKS (``JwksUrl`` empty: a test stack before its identity provider is
connected) takes API keys only: a JWT, however well signed, is a 401 that says why, not the
authorizer error API Gateway would answer 500."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from context_ledger.auth import authorizer
from context_ledger.auth.api_keys import create_api_key
from context_ledger.auth.authorizer import API_KEYS_ONLY, AUTH_ERROR_KEY, authorize
from context_ledger.auth.local_keys import LocalKeys, issue_token
from context_ledger.db import connection
from context_ledger.settings import get_settings
from context_ledger.spaces.service import create_organisation


@pytest.fixture
def without_jwks(db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("KEYSTONE_AUTH_JWKS_URL", raising=False)
    get_settings.cache_clear()
    authorizer._jwt_verifier.cache_clear()
    yield
    get_settings.cache_clear()
    authorizer._jwt_verifier.cache_clear()


def _bearer(credential: str) -> dict:
    return {"headers": {"authorization": f"Bearer {credential}"}}


def test_a_jwt_is_refused_and_an_api_key_accepted(without_jwks: None, local_keys: LocalKeys):
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
        key = create_api_key(conn, org_id=org.id, user_id="alice")
    settings = get_settings()
    jwt = issue_token(
        local_keys,
        issuer=settings.auth_issuer,
        audience=settings.auth_audience,
        org_id=org.id,
        user_id="alice",
    )

    refused = authorize(_bearer(jwt))
    accepted = authorize(_bearer(key.key))

    assert refused == {"isAuthorized": True, "context": {AUTH_ERROR_KEY: API_KEYS_ONLY}}
    assert accepted["context"]["orgId"] == str(org.id)
    assert accepted["context"]["authMethod"] == "api_key"
