"""Level weights, capabilities and status over HTTP: whole responses, status and error codes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from api_support import bearer, error_of

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.settings import DEFAULT_LEVEL_WEIGHTS, get_settings

WEIGHTS = "/api/v1/context/weights"
CAPABILITIES = "/api/v1/context/capabilities"
STATUS = "/api/v1/context/status"
SPACES = "/api/v1/context/spaces"
EVENTS = Path(__file__).resolve().parents[2] / "events"

EMBEDDINGS_HOST = "embeddings.internal-secret-host.example"
EMBEDDINGS_URL = f"https://{EMBEDDINGS_HOST}:8443/v1"
EMBEDDINGS_KEY = "sk-live-do-not-leak-0123456789"


def grant(api: httpx.Client, headers, space_id, subject: str, *permissions: str) -> None:
    body = {"subject": subject, "permissions": list(permissions)}
    response = api.put(f"{SPACES}/{space_id}/grants", headers=headers, json=body)
    assert response.status_code == 204, response.text


@pytest.fixture
def configure(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """configure(VARIABLE=value, ...): the functions read these settings from now on."""

    def apply(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()

    yield apply
    monkeypatch.undo()
    get_settings.cache_clear()


# --- weights: reading and replacing -------------------------------------------------------------


def test_without_overrides_the_weights_are_the_defaults(api, admin_headers) -> None:
    response = api.get(WEIGHTS, headers=admin_headers)

    assert response.status_code == 200
    assert response.json() == {
        "defaults": DEFAULT_LEVEL_WEIGHTS,
        "overrides": {},
        "effective": DEFAULT_LEVEL_WEIGHTS,
    }


def test_put_replaces_the_overrides_and_get_shows_them(api, admin_headers) -> None:
    api.put(WEIGHTS, headers=admin_headers, json={"overrides": {"team": 0.5, "group": 2}})

    put = api.put(WEIGHTS, headers=admin_headers, json={"overrides": {"project": 1.3}})
    got = api.get(WEIGHTS, headers=admin_headers)

    expected = {
        "defaults": DEFAULT_LEVEL_WEIGHTS,
        "overrides": {"project": 1.3},
        "effective": {**DEFAULT_LEVEL_WEIGHTS, "project": 1.3},
    }
    assert (put.status_code, put.json()) == (200, expected)
    assert (got.status_code, got.json()) == (200, expected)


@pytest.mark.parametrize("body", [{}, {"overrides": {}}])
def test_an_empty_body_or_empty_overrides_resets_to_the_defaults(api, admin_headers, body) -> None:
    api.put(WEIGHTS, headers=admin_headers, json={"overrides": {"project": 1.3}})

    response = api.put(WEIGHTS, headers=admin_headers, json=body)

    assert response.status_code == 200
    assert response.json()["overrides"] == {}
    assert api.get(WEIGHTS, headers=admin_headers).json()["effective"] == DEFAULT_LEVEL_WEIGHTS


@pytest.mark.parametrize(
    ("weight", "expected"), [("1.2345", 1.2345), ("10", 10.0), ("0.0001", 0.0001)]
)
def test_weights_in_range_with_at_most_4_decimals_are_accepted(
    api, admin_headers, weight, expected
) -> None:
    response = api.put(
        WEIGHTS,
        headers={**admin_headers, "Content-Type": "application/json"},
        content=f'{{"overrides": {{"subproject": {weight}}}}}',
    )

    assert response.status_code == 200, response.text
    assert response.json()["overrides"] == {"subproject": expected}


def test_operator_defaults_from_the_environment_are_the_defaults(
    api, admin_headers, configure
) -> None:
    configure(KEYSTONE_CONTEXT_LEVEL_WEIGHTS="project=1.5,personal=0.5")
    api.put(WEIGHTS, headers=admin_headers, json={"overrides": {"personal": 0.6}})

    response = api.get(WEIGHTS, headers=admin_headers)

    defaults = {**DEFAULT_LEVEL_WEIGHTS, "project": 1.5, "personal": 0.5}
    assert response.json() == {
        "defaults": defaults,
        "overrides": {"personal": 0.6},
        "effective": {**defaults, "personal": 0.6},
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"overrides": {"galaxy": 1.0}}', "overrides.galaxy"),
        ('{"overrides": {"project": 0}}', "overrides.project"),
        ('{"overrides": {"project": -1.5}}', "overrides.project"),
        ('{"overrides": {"project": 10.0001}}', "overrides.project"),
        ('{"overrides": {"project": 1.23456}}', "overrides.project"),
        ('{"overrides": {"project": true}}', "overrides.project"),
        ('{"overrides": {"project": "1.2"}}', "overrides.project"),
        ('{"overrides": {"project": null}}', "overrides.project"),
        ('{"overrides": {"project": [1.2]}}', "overrides.project"),
        ('{"overrides": [["project", 1.2]]}', "overrides"),
        ('{"overrides": null}', "overrides"),
        ('{"project": 1.3}', "project"),
    ],
)
def test_an_invalid_override_is_422_naming_the_field(api, admin_headers, body, field) -> None:
    api.put(WEIGHTS, headers=admin_headers, json={"overrides": {"team": 0.5}})

    response = api.put(
        WEIGHTS, headers={**admin_headers, "Content-Type": "application/json"}, content=body
    )

    assert error_of(response) == (422, "validation_failed")
    assert response.json()["error"]["message"].startswith(f"{field}: ")
    assert api.get(WEIGHTS, headers=admin_headers).json()["overrides"] == {"team": 0.5}


def test_a_body_naming_another_organisation_is_refused(api, admin_headers, other_org) -> None:
    body = {"overrides": {}, "orgId": str(other_org.id)}

    assert error_of(api.put(WEIGHTS, headers=admin_headers, json=body)) == (403, "forbidden")


# --- weights: who may ---------------------------------------------------------------------------


def test_a_searcher_on_the_organisation_space_is_403(api, org, admin_headers, token) -> None:
    grant(api, admin_headers, org.space_id, "user:reader", "context:space:search")
    reader = bearer(token(org, "reader"))

    assert error_of(api.get(WEIGHTS, headers=reader)) == (403, "forbidden")
    put = api.put(WEIGHTS, headers=reader, json={"overrides": {"project": 9}})
    assert error_of(put) == (403, "forbidden")
    assert api.get(WEIGHTS, headers=admin_headers).json()["overrides"] == {}


def test_a_user_without_a_grant_on_the_organisation_space_is_404(api, org, token) -> None:
    stranger = bearer(token(org, "stranger"))

    assert error_of(api.get(WEIGHTS, headers=stranger)) == (404, "context.space.not_found")
    put = api.put(WEIGHTS, headers=stranger, json={"overrides": {"galaxy": "x"}})
    assert error_of(put) == (404, "context.space.not_found")


def test_an_admin_grant_on_the_organisation_space_may_change_weights(
    api, org, admin_headers, token
) -> None:
    grant(api, admin_headers, org.space_id, "group:ranking", "context:space:admin")
    carol = bearer(token(org, "carol", groups=["ranking"]))

    response = api.put(WEIGHTS, headers=carol, json={"overrides": {"project": 1.3}})

    assert response.status_code == 200
    assert response.json()["overrides"] == {"project": 1.3}


def test_overrides_are_per_organisation(api, org, other_org, admin_headers, token) -> None:
    other_admin = bearer(token(other_org, "root", SCOPE_CONTEXT_ADMIN))
    api.put(WEIGHTS, headers=admin_headers, json={"overrides": {"project": 1.3}})

    theirs = api.get(WEIGHTS, headers=other_admin)
    api.put(WEIGHTS, headers=other_admin, json={"overrides": {"team": 0.5}})
    ours = api.get(WEIGHTS, headers=admin_headers)

    assert theirs.json()["overrides"] == {}
    assert ours.json()["overrides"] == {"project": 1.3}


# --- capabilities -------------------------------------------------------------------------------


def test_any_authenticated_caller_reads_the_capabilities(api, org, token) -> None:
    response = api.get(CAPABILITIES, headers=bearer(token(org, "bob")))

    assert response.status_code == 200
    assert response.json() == {
        "retrieval": {
            "served": True,
            "defaultTokenBudget": 4096,
            "maxTokenBudget": 32000,
            "defaultMaxPerLevel": 5,
            "maxMaxPerLevel": 50,
            "searchModes": ["full_text"],
        }
    }


def test_vector_search_is_a_capability_once_embeddings_are_configured(
    api, org, token, configure
) -> None:
    configure(
        KEYSTONE_CONTEXT_EMBEDDINGS_URL=EMBEDDINGS_URL,
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="text-embedding-3-small",
        KEYSTONE_CONTEXT_EMBEDDINGS_API_KEY=EMBEDDINGS_KEY,
    )

    response = api.get(CAPABILITIES, headers=bearer(token(org, "bob")))

    assert response.json()["retrieval"]["searchModes"] == ["full_text", "vector"]
    assert EMBEDDINGS_HOST not in response.text
    assert EMBEDDINGS_KEY not in response.text


def test_capabilities_need_a_credential(api) -> None:
    assert api.get(CAPABILITIES).status_code == 401


# --- status -------------------------------------------------------------------------------------


def pgvector_installed(database_url: str) -> bool:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("permission", [None, "context:space:search", "context:space:admin"])
def test_status_is_403_without_the_context_admin_scope(
    api, org, admin_headers, token, permission
) -> None:
    if permission:
        grant(api, admin_headers, org.space_id, "user:bob", permission)

    response = api.get(STATUS, headers=bearer(token(org, "bob")))

    assert error_of(response) == (403, "forbidden")


def test_status_without_embeddings(api, admin_headers, database_url) -> None:
    response = api.get(STATUS, headers=admin_headers)

    assert response.status_code == 200
    assert response.json() == {
        "searchBackend": "exact",
        "pgvectorAvailable": pgvector_installed(database_url),
        "embeddings": {"configured": False, "model": None, "dimensions": None, "locality": "none"},
    }


@pytest.mark.parametrize(
    ("extra", "locality"),
    [
        ({}, "external"),
        ({"KEYSTONE_CONTEXT_EMBEDDINGS_INTERNAL_HOSTS": EMBEDDINGS_HOST}, "in_deployment"),
        ({"KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL": "false"}, "in_deployment"),
    ],
)
def test_status_reports_the_embeddings_configuration_without_url_host_or_key(
    api, admin_headers, database_url, configure, extra, locality
) -> None:
    configure(
        KEYSTONE_CONTEXT_SEARCH_BACKEND="pgvector",
        KEYSTONE_CONTEXT_EMBEDDINGS_URL=EMBEDDINGS_URL,
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="text-embedding-3-small",
        KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS="1536",
        KEYSTONE_CONTEXT_EMBEDDINGS_API_KEY=EMBEDDINGS_KEY,
        **extra,
    )

    response = api.get(STATUS, headers=admin_headers)

    assert response.status_code == 200
    assert response.json() == {
        "searchBackend": "pgvector",
        "pgvectorAvailable": pgvector_installed(database_url),
        "embeddings": {
            "configured": True,
            "model": "text-embedding-3-small",
            "dimensions": 1536,
            "locality": locality,
        },
    }
    for secret in (EMBEDDINGS_URL, EMBEDDINGS_HOST, "internal-secret-host", EMBEDDINGS_KEY):
        assert secret not in response.text


# --- the function's sample events ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "context-admin-weights-get.json",
        "context-admin-weights-put.json",
        "context-admin-capabilities.json",
        "context-admin-status.json",
    ],
)
def test_the_sample_events_invoke_the_function(runtime, api, org, name) -> None:
    event = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    event["requestContext"]["authorizer"]["lambda"]["orgId"] = str(org.id)

    result = runtime.invoke("ContextAdminFunction", event)

    assert result["statusCode"] == 200, result["body"]
