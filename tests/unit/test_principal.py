"""The principal survives the trip through the API Gateway authorizer context."""

from __future__ import annotations

import uuid

import pytest

from context_ledger.auth.principal import AuthMethod, Principal, PrincipalKind


def test_principal_round_trips_through_the_authorizer_context() -> None:
    principal = Principal(
        org_id=uuid.uuid4(),
        user_id="alice@example.com",
        client_id="editor",
        scopes=frozenset({"context:admin", "audit:read"}),
        groups=frozenset({"eng", "sre team"}),
        kind=PrincipalKind.SERVICE,
        auth_method=AuthMethod.API_KEY,
    )

    context = principal.to_authorizer_context()

    assert all(isinstance(v, str | bool) for v in context.values())
    assert Principal.from_authorizer_context(context) == principal


def test_grant_subjects_cover_the_user_and_each_group() -> None:
    principal = Principal(
        org_id=uuid.uuid4(), user_id="bob", client_id=None, groups=frozenset({"b", "a"})
    )

    assert principal.subjects == ["user:bob", "group:a", "group:b"]


@pytest.mark.parametrize(
    "context", [{}, {"orgId": "x", "userId": "u"}, {"orgId": str(uuid.uuid4())}]
)
def test_an_incomplete_context_is_rejected(context: dict) -> None:
    with pytest.raises((KeyError, ValueError)):
        Principal.from_authorizer_context(context)
