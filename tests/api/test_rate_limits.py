"""Rate limits through the local runtime: per organisation, per API key and the memory API's per
credential, on every API function; over one is ``429 rate_limited`` with ``Retry-After``.

Limits are set per test through the environment (the runtime's functions read their settings per
request, as a redeployed Lambda would); each test's organisations are fresh and the ``db``
fixture empties the buckets afterwards, so no other test is throttled.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from api_support import bearer, error_of

from context_ledger.auth.api_keys import create_api_key
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection
from context_ledger.http import api as registry
from context_ledger.http.openapi import openapi_document
from context_ledger.local.runtime import LocalRuntime
from context_ledger.settings import get_settings
from context_ledger.spaces.service import Organisation

SPACES = "/api/v1/context/spaces"
EVENTS = Path(__file__).resolve().parents[2] / "events"
SetLimits = Callable[..., None]


@pytest.fixture
def limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[SetLimits]:
    """limits(VARIABLE=value, ...): the runtime's rate-limit settings for this test."""

    def set_limits(**variables: object) -> None:
        for name, value in variables.items():
            monkeypatch.setenv(name, str(value))
        get_settings.cache_clear()

    yield set_limits
    monkeypatch.undo()
    get_settings.cache_clear()


def retry_after(response: httpx.Response) -> int:
    return int(response.headers["Retry-After"])


def api_key(org: Organisation, user: str) -> dict[str, str]:
    with connection() as conn:
        issued = create_api_key(
            conn, org_id=org.id, user_id=user, scopes=frozenset({SCOPE_CONTEXT_ADMIN})
        )
    return bearer(issued.key)


def test_a_tenant_over_its_limit_gets_429_while_another_is_served(
    api, org, other_org, token, limits
) -> None:
    limits(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{org.id}=3", KEYSTONE_RATE_LIMIT_BURST_SECONDS=60)
    noisy = bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))
    quiet = bearer(token(other_org, "root", SCOPE_CONTEXT_ADMIN))

    with ThreadPoolExecutor(4) as pool:
        hammering = [pool.submit(api.get, SPACES, headers=noisy) for _ in range(12)]
        calm = [pool.submit(api.get, SPACES, headers=quiet) for _ in range(4)]
        noisy_answers = [f.result() for f in hammering]
        quiet_answers = [f.result() for f in calm]

    statuses = sorted(a.status_code for a in noisy_answers)
    assert statuses == [200] * 3 + [429] * 9
    assert [a.status_code for a in quiet_answers] == [200] * 4
    refused = next(a for a in noisy_answers if a.status_code == 429)
    assert error_of(refused) == (429, "rate_limited")
    # 3 per minute, 3 at once: the next one 20 s after the burst
    assert 1 <= retry_after(refused) <= 20
    assert "organisation" in refused.json()["error"]["message"]


def test_an_api_key_over_its_limit_does_not_stop_the_organisations_other_keys(
    api, org, token, limits
) -> None:
    limits(KEYSTONE_RATE_LIMIT_API_KEY_PER_MINUTE=2, KEYSTONE_RATE_LIMIT_BURST_SECONDS=60)
    leaked, other = api_key(org, "ci"), api_key(org, "laptop")

    leaked_answers = [api.get(SPACES, headers=leaked) for _ in range(5)]
    other_answer = api.get(SPACES, headers=other)
    token_answer = api.get(SPACES, headers=bearer(token(org, "root", SCOPE_CONTEXT_ADMIN)))

    assert [a.status_code for a in leaked_answers] == [200, 200, 429, 429, 429]
    assert error_of(leaked_answers[2]) == (429, "rate_limited")
    assert "API key" in leaked_answers[2].json()["error"]["message"]
    assert 29 <= retry_after(leaked_answers[2]) <= 30  # 2 per minute: one every 30 s
    assert other_answer.status_code == 200
    assert token_answer.status_code == 200  # the key's refusals did not use up the organisation


def test_a_bad_credential_is_401_even_when_its_organisation_is_throttled(
    api, org, token, limits
) -> None:
    limits(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{org.id}=1")
    valid = bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))
    api.get(SPACES, headers=valid)

    throttled = api.get(SPACES, headers=valid)
    forged = api.get(SPACES, headers=bearer("ctxl_" + "x" * 43))
    garbage = api.get(SPACES, headers=bearer("not-a-token"))

    assert throttled.status_code == 429
    assert error_of(forged) == (401, "unauthorized")
    assert error_of(garbage) == (401, "unauthorized")
    assert "Retry-After" not in forged.headers


def spaces_of(org: Organisation) -> list[str]:
    with connection() as conn:
        rows = conn.execute("SELECT name FROM spaces WHERE org_id = %s", (org.id,)).fetchall()
    return sorted(row["name"] for row in rows)


def test_a_refused_request_does_nothing(api, org, token, limits) -> None:
    limits(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{org.id}=1")
    admin = bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))
    api.get(SPACES, headers=admin)
    before = spaces_of(org)

    refused = api.post(SPACES, headers=admin, json={"name": "Payments", "level": "team"})

    assert refused.status_code == 429
    assert spaces_of(org) == before


def test_a_retrieval_refused_before_its_count_is_sent_is_still_counted(
    api, org, token, limits
) -> None:
    # The retrieve route sends its count with its first round trip; a request that never gets
    # there (an invalid body) is counted when it ends, its answer unchanged.
    limits(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{org.id}=1")
    admin = bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))
    retrieve = "/api/v1/context/retrieve"

    invalid = api.post(retrieve, headers=admin, json={"query": "refunds", "tokenBudget": -1})
    valid = api.post(retrieve, headers=admin, json={"query": "refunds"})

    assert error_of(invalid) == (422, "validation_failed")
    assert error_of(valid) == (429, "rate_limited")
    assert 1 <= retry_after(valid) <= 60


def test_the_memory_limit_per_credential_sends_retry_after(api, org, token, limits) -> None:
    limits(VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE=2)
    busy = bearer(token(org, "busy-agent", SCOPE_CONTEXT_ADMIN))
    calm = bearer(token(org, "calm-agent", SCOPE_CONTEXT_ADMIN))

    answers = [api.get("/api/context/billing", headers=busy) for _ in range(3)]
    other = api.get("/api/context/billing", headers=calm)
    elsewhere = api.get(SPACES, headers=busy)  # not the memory API: its own limits only

    assert [a.status_code for a in answers] == [404, 404, 429]  # no project yet: 404
    assert error_of(answers[2]) == (429, "rate_limited")
    assert 29 <= retry_after(answers[2]) <= 30  # 2 per minute, both at once: next in 30 s
    assert other.status_code == 404
    assert elsewhere.status_code == 200


def test_a_hand_made_event_without_the_header_counts_against_its_organisation(
    runtime: LocalRuntime, org, limits
) -> None:
    # `context-ledger invoke` and the benchmarks call handlers with events of their own; API
    # Gateway itself never passes a request without the header its authorizer verified.
    limits(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{org.id}=1")
    event = json.loads((EVENTS / "context-admin-capabilities.json").read_text())
    del event["headers"]["authorization"]
    event["requestContext"]["authorizer"]["lambda"]["orgId"] = str(org.id)

    answers = [runtime.invoke("ContextAdminFunction", event) for _ in range(2)]

    assert [a["statusCode"] for a in answers] == [200, 429]


#: One route of each API function (any answer but 429 the first time).
ROUTE_OF_FUNCTION: dict[str, tuple[str, str, dict | None]] = {
    "spaces": ("GET", SPACES, None),
    "sources": ("GET", "/api/v1/context/spaces/{space}/sources", None),
    "retrieve": ("POST", "/api/v1/context/retrieve", {"query": "refunds"}),
    "attributions": ("GET", f"/api/v1/context/attribution/{uuid.uuid4()}", None),
    "context_admin": ("GET", "/api/v1/openapi.json", None),
    "observability": ("GET", "/api/v1/observability/compliance-evidence", None),
    "memory": ("GET", "/api/context/billing", None),
    "model_gateway": ("GET", "/api/v1/models/logs", None),
    "embeddings": ("POST", "/api/v1/embeddings", {}),
}


def test_every_api_function_is_covered_below() -> None:
    assert set(ROUTE_OF_FUNCTION) == set(registry.FUNCTIONS)


@pytest.mark.parametrize("function", sorted(ROUTE_OF_FUNCTION))
def test_every_api_function_counts_against_the_organisation(
    api, org, token, limits, function: str
) -> None:
    limits(KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{org.id}=1")
    method, path, body = ROUTE_OF_FUNCTION[function]
    headers = bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))
    url = path.format(space=org.space_id)

    first = api.request(method, url, headers=headers, json=body)
    second = api.request(method, url, headers=headers, json=body)

    assert first.status_code != 429, first.text
    assert second.status_code == 429, second.text
    assert 1 <= retry_after(second) <= 60
    error = second.json()["error"]
    if function == "embeddings":  # OpenAI's error body, as for every error of that endpoint
        assert (error["type"], error["code"]) == ("invalid_request_error", "rate_limited")
    else:
        assert error["code"] == "rate_limited"


def test_every_operation_documents_429_with_retry_after() -> None:
    operations = [
        operation for item in openapi_document()["paths"].values() for operation in item.values()
    ]

    assert operations
    for operation in operations:
        assert "Retry-After" in operation["responses"]["429"]["headers"]
