"""Spaces API: whole responses, status codes and error codes over HTTP."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from api_support import bearer, error_of

from context_ledger.auth.api_keys import create_api_key, revoke_api_key
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection

SPACES = "/api/v1/context/spaces"


def create_team(api: httpx.Client, headers: dict[str, str], name: str = "Payments") -> dict:
    response = api.post(SPACES, headers=headers, json={"name": name, "level": "team"})
    assert response.status_code == 201, response.text
    return response.json()


def test_creating_a_space_answers_201_with_the_space(api, org, admin_headers) -> None:
    response = api.post(SPACES, headers=admin_headers, json={"name": " Payments ", "level": "team"})

    assert response.status_code == 201
    body = response.json()
    assert uuid.UUID(body.pop("id"))
    assert body.pop("createdAt")
    assert body == {
        "name": "Payments",
        "level": "team",
        "parentId": str(org.space_id),
        "key": None,
        "permissions": ["context:space:admin", "context:space:search"],
    }


def test_a_granted_user_lists_and_reads_the_space_and_its_children(
    api, org, admin_headers, token
) -> None:
    team = create_team(api, admin_headers)
    project = api.post(
        SPACES,
        headers=admin_headers,
        json={"name": "Billing", "level": "project", "parentId": team["id"]},
    ).json()
    granted = api.put(
        f"{SPACES}/{team['id']}/grants",
        headers=admin_headers,
        json={"subject": "user:alice", "permissions": ["context:space:search"]},
    )
    alice = bearer(token(org, "alice"))

    listed = api.get(SPACES, headers=alice)
    read = api.get(f"{SPACES}/{project['id']}", headers=alice)

    assert granted.status_code == 204
    assert granted.content == b""
    levels = {s["id"]: (s["level"], s["permissions"]) for s in listed.json()["spaces"]}
    assert levels[team["id"]] == ("team", ["context:space:search"])
    assert levels[project["id"]] == ("project", ["context:space:search"])
    assert sorted(level for level, _ in levels.values()) == ["personal", "project", "team"]
    assert read.status_code == 200
    assert read.json()["permissions"] == ["context:space:search"]


def test_a_space_of_another_organisation_is_404(api, org, other_org, admin_headers, token) -> None:
    team = create_team(api, admin_headers)
    foreign = bearer(token(other_org, "root", SCOPE_CONTEXT_ADMIN))

    assert error_of(api.get(f"{SPACES}/{team['id']}", headers=foreign)) == (
        404,
        "context.space.not_found",
    )
    grant = {"subject": "user:mallory", "permissions": ["context:space:admin"]}
    assert error_of(api.put(f"{SPACES}/{team['id']}/grants", headers=foreign, json=grant)) == (
        404,
        "context.space.not_found",
    )
    child = {"name": "x", "level": "project", "parentId": team["id"]}
    assert error_of(api.post(SPACES, headers=foreign, json=child)) == (
        404,
        "context.space.not_found",
    )


@pytest.mark.parametrize("space_id", ["not-a-uuid", "1234", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_or_malformed_space_id_is_404(api, admin_headers, space_id) -> None:
    response = api.get(f"{SPACES}/{space_id}", headers=admin_headers)

    assert error_of(response) == (404, "context.space.not_found")


def test_a_user_without_permission_cannot_see_or_change_a_space(
    api, org, admin_headers, token
) -> None:
    team = create_team(api, admin_headers)
    api.put(
        f"{SPACES}/{team['id']}/grants",
        headers=admin_headers,
        json={"subject": "user:reader", "permissions": ["context:space:search"]},
    )
    stranger, reader = bearer(token(org, "stranger")), bearer(token(org, "reader"))
    grant = {"subject": "user:reader", "permissions": ["context:space:admin"]}

    assert error_of(api.get(f"{SPACES}/{team['id']}", headers=stranger))[0] == 404
    assert error_of(api.put(f"{SPACES}/{team['id']}/grants", headers=reader, json=grant)) == (
        403,
        "forbidden",
    )
    assert error_of(
        api.post(
            SPACES, headers=reader, json={"name": "x", "level": "project", "parentId": team["id"]}
        )
    ) == (403, "forbidden")
    assert (
        error_of(api.post(SPACES, headers=stranger, json={"name": "x", "level": "team"}))[0] == 404
    )


@pytest.mark.parametrize("field", ["orgId", "organisationId", "organizationId", "org_id"])
def test_a_body_naming_another_organisation_is_refused(api, admin_headers, field) -> None:
    body = {"name": "x", "level": "team", field: str(uuid.uuid4())}

    response = api.post(SPACES, headers=admin_headers, json=body)

    assert error_of(response) == (403, "forbidden")


def test_a_query_naming_another_user_is_refused(api, admin_headers) -> None:
    response = api.get(SPACES, headers=admin_headers, params={"userId": "someone-else"})

    assert error_of(response) == (403, "forbidden")


def test_a_body_repeating_the_callers_own_organisation_is_accepted(api, org, admin_headers) -> None:
    body = {"name": "x", "level": "team", "orgId": str(org.id), "userId": "root"}

    assert api.post(SPACES, headers=admin_headers, json=body).status_code == 201


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "level": "galaxy"},
        {"name": "", "level": "team"},
        {"name": "x" * 201, "level": "team"},
        {"level": "team"},
        {"name": "x", "level": "team", "score": 1},
        {"name": "x", "level": "organisation"},
        {"name": "x", "level": "personal"},
    ],
)
def test_an_invalid_space_body_is_422_with_a_clear_message(api, admin_headers, body) -> None:
    response = api.post(SPACES, headers=admin_headers, json=body)

    assert error_of(response) == (422, "validation_failed")
    assert response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("level", "parent_level"),
    [("business_unit", None), ("subproject", "project"), ("galaxy", None), ("organisation", None)],
)
def test_levels_defined_but_unused_by_the_spec_are_not_creatable(
    api, admin_headers, level, parent_level
) -> None:
    parent = None
    if parent_level is not None:
        team = create_team(api, admin_headers)
        body = {"name": "Billing", "level": parent_level, "parentId": team["id"]}
        parent = api.post(SPACES, headers=admin_headers, json=body).json()["id"]
    body = {"name": "x", "level": level, **({"parentId": parent} if parent else {})}

    response = api.post(SPACES, headers=admin_headers, json=body)

    assert error_of(response) == (422, "validation_failed")
    message = response.json()["error"]["message"]
    assert "level must be one of department, group, team, project" in message
    assert "business_unit" not in message.replace(level, "")


def test_a_body_that_is_not_json_is_400(api, admin_headers) -> None:
    response = api.post(
        SPACES, headers={**admin_headers, "Content-Type": "application/json"}, content=b"{not json"
    )

    assert error_of(response) == (400, "invalid_request")


def test_an_oversized_body_is_413(api, admin_headers) -> None:
    body = json.dumps({"name": "x", "level": "team", "pad": "x" * 1_100_000})

    response = api.post(
        SPACES, headers={**admin_headers, "Content-Type": "application/json"}, content=body
    )

    assert error_of(response) == (413, "payload_too_large")


@pytest.mark.parametrize(
    "grant",
    [
        {"subject": "alice", "permissions": ["context:space:search"]},
        {"subject": "user:alice", "permissions": ["context:space:delete"]},
        {"subject": "user:alice"},
    ],
)
def test_an_invalid_grant_is_422(api, admin_headers, grant) -> None:
    team = create_team(api, admin_headers)

    response = api.put(f"{SPACES}/{team['id']}/grants", headers=admin_headers, json=grant)

    assert error_of(response) == (422, "validation_failed")


def test_without_a_credential_api_gateway_answers_401(api) -> None:
    assert api.get(SPACES).status_code == 401


@pytest.mark.parametrize("credential", ["garbage", "ctxl_unknownkey", "a.b.c"])
def test_a_credential_that_does_not_verify_is_401_with_the_error_body(api, credential) -> None:
    response = api.get(SPACES, headers=bearer(credential))

    assert error_of(response) == (401, "unauthorized")


def test_an_expired_token_is_401(api, org, local_keys) -> None:
    from context_ledger.auth.local_keys import issue_token
    from context_ledger.settings import get_settings

    settings = get_settings()
    expired = issue_token(
        local_keys,
        issuer=settings.auth_issuer,
        audience=settings.auth_audience,
        org_id=org.id,
        user_id="alice",
        ttl_seconds=-120,
    )

    response = api.get(SPACES, headers=bearer(expired))

    assert error_of(response) == (401, "unauthorized")
    assert "expired" in response.json()["error"]["message"]


def test_an_api_key_authenticates_until_revoked(api, org, admin_headers) -> None:
    team = create_team(api, admin_headers)
    with connection() as conn:
        issued = create_api_key(
            conn, org_id=org.id, user_id="root", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
        )

    assert api.get(f"{SPACES}/{team['id']}", headers=bearer(issued.key)).status_code == 200
    with connection() as conn:
        assert revoke_api_key(conn, org_id=org.id, key_id=issued.id)
    assert error_of(api.get(SPACES, headers=bearer(issued.key))) == (401, "unauthorized")


def test_an_unknown_route_is_404(api, admin_headers) -> None:
    assert api.get("/api/v1/nowhere", headers=admin_headers).status_code == 404
