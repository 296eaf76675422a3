"""What the memory API's rate limit counts against: an API key, or a token's user and client."""

from __future__ import annotations

import uuid

from context_ledger.auth.principal import AuthMethod, Principal
from context_ledger.memory.ratelimit import rate_key

ORG = uuid.UUID("5f0c3a9e-8d2b-4c1e-9f6a-2b7d4e8c1a03")


def person(user: str = "alice", client: str = "editor", method=AuthMethod.JWT) -> Principal:
    return Principal(org_id=ORG, user_id=user, client_id=client, auth_method=method)


def test_every_token_of_one_user_and_client_shares_one_count() -> None:
    assert rate_key(person(), "Bearer token-1") == rate_key(person(), "Bearer token-2")


def test_another_user_or_client_counts_apart() -> None:
    keys = {
        rate_key(person(), "Bearer t"),
        rate_key(person(user="bob"), "Bearer t"),
        rate_key(person(client="cli"), "Bearer t"),
    }

    assert len(keys) == 3


def test_each_api_key_counts_apart_even_for_one_user() -> None:
    api_key = AuthMethod.API_KEY

    assert rate_key(person(method=api_key), "Bearer ctxl_a") != rate_key(
        person(method=api_key), "Bearer ctxl_b"
    )


def test_the_key_is_a_digest_not_the_credential() -> None:
    key = rate_key(person(method=AuthMethod.API_KEY), "Bearer ctxl_secret")

    assert len(key) == 32
    assert b"ctxl_secret" not in key
