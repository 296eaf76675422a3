"""Who may link a retrieval through the gateway, the request body rule, and the stream's final
outcome event."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from context_ledger.attribution.lookup import Attribution
from context_ledger.auth.principal import (
    SCOPE_AUDIT_READ,
    SCOPE_CONTEXT_ADMIN,
    Principal,
    PrincipalKind,
)
from context_ledger.errors import InvalidRequestError
from context_ledger.model_gateway.headers import GatewayHeaders
from context_ledger.model_gateway.linking import may_link
from context_ledger.model_gateway.provider import Endpoint
from context_ledger.model_gateway.service import CallRequest

ORG = uuid.uuid4()


def attribution(user: str) -> Attribution:
    return Attribution(
        attribution_id=uuid.uuid4(),
        request_id="req_1",
        org_id=ORG,
        user_id=user,
        space_id=None,
        created_at=datetime.now(UTC),
        chain=f"org:{ORG}",
        seq=1,
        record={},
    )


def caller(user: str, *scopes: str, kind: PrincipalKind = PrincipalKind.PERSON) -> Principal:
    return Principal(org_id=ORG, user_id=user, client_id=None, scopes=frozenset(scopes), kind=kind)


def test_a_person_may_link_their_own_retrieval() -> None:
    assert may_link(caller("alice"), attribution("alice"))


def test_another_persons_retrieval_needs_audit_read() -> None:
    assert not may_link(caller("bob"), attribution("alice"))
    assert not may_link(caller("bob", SCOPE_CONTEXT_ADMIN), attribution("alice"))
    assert may_link(caller("bob", SCOPE_AUDIT_READ), attribution("alice"))


def test_a_service_may_never_link() -> None:
    service = caller("alice", SCOPE_AUDIT_READ, kind=PrincipalKind.SERVICE)
    assert not may_link(service, attribution("alice"))


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b'"text"', b"null"])
def test_a_body_that_is_not_a_json_object_is_400(body: bytes) -> None:
    with pytest.raises(InvalidRequestError):
        CallRequest.of(caller("alice"), Endpoint.CHAT_COMPLETIONS, body, GatewayHeaders(None))


def test_model_and_stream_are_read_for_the_log_and_the_body_kept_as_sent() -> None:
    body = b'{"stream": true,  "model": "m-1"}'
    call = CallRequest.of(caller("a"), Endpoint.CHAT_COMPLETIONS, body, GatewayHeaders(None))
    assert (call.model, call.stream, call.body) == ("m-1", True, body)
