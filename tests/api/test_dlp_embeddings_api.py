"""What reaches an embeddings endpoint through the whole service: ingest and retrieval over HTTP,
with a recording stand-in endpoint on loopback (internal) or declared external.

The stand-in's request log is the proof: a text it never received was never sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from api_support import TEMPLATE, attribution_row, bearer, runtime_env

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.local.runtime import LocalRuntime
from context_ledger.retrieval.query_vector import DEGRADED_WARNING

SPACES = "/api/v1/context/spaces"
SOURCES = "/api/v1/context/sources"
POLICY = "/api/v1/context/dlp/policy"
AWS_KEY = "AKIAQ3EGRTW5NB7XKP2M"
CLASSIFICATIONS = ["public", "internal", "confidential", "restricted", "regulated"]


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 32) as running:
        yield running


@pytest.fixture(scope="module", params=["internal", "external"])
def endpoint(request, database_url, sqs_endpoint, local_keys, stand_in) -> Iterator[dict]:
    """A runtime whose embeddings endpoint is the stand-in, counted as internal or external."""
    env = runtime_env(
        database_url,
        local_keys,
        KEYSTONE_CONTEXT_EMBEDDINGS_URL=stand_in.url,
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="stand-in",
        KEYSTONE_CONTEXT_EMBEDDINGS_EXTERNAL="true" if request.param == "external" else "",
        KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS="1",
        KEYSTONE_CONTEXT_EMBEDDINGS_COOLDOWN_SECONDS="0",  # each test starts with a live endpoint
    )
    with LocalRuntime(TEMPLATE, port=0, env=env, sqs_endpoint=sqs_endpoint) as running:
        yield {"url": running.url, "locality": request.param}


@pytest.fixture
def client(endpoint, db, stand_in) -> Iterator[httpx.Client]:
    stand_in.reset()
    with httpx.Client(base_url=endpoint["url"], timeout=30) as http:
        yield http


def marker(classification: str) -> str:
    """A word only this classification's document holds."""
    return f"zq{classification}marker"


def ingest_every_classification(api: httpx.Client, admin: dict[str, str]) -> str:
    """A project with one source per classification; returns the project's id."""
    project = api.post(SPACES, headers=admin, json={"name": "Vault", "level": "project"})
    project_id = project.json()["id"]
    for classification in CLASSIFICATIONS:
        source = api.post(
            f"{SPACES}/{project_id}/sources",
            headers=admin,
            json={"kind": "docs", "name": classification, "classification": classification},
        ).json()["id"]
        content = (
            f"Rotation runbook {marker(classification)}: export AWS_ACCESS_KEY_ID={AWS_KEY}\n"
            f"then mail oncall@example.com and call +44 20 7946 0958."
        )
        response = api.put(
            f"{SOURCES}/{source}/index",
            headers=admin,
            json={"documents": [{"path": f"{classification}.md", "content": content}]},
        )
        assert response.status_code == 200, response.text
    return project_id


def everything_sent(stand_in: StandInEmbeddingsServer) -> str:
    return "\n".join(text for r in stand_in.requests for text in r.body["input"])


@pytest.fixture
def admin(org, token) -> dict[str, str]:
    return bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))


def test_with_the_default_policy_only_redacted_open_sources_and_queries_are_sent(
    client, endpoint, admin, stand_in
) -> None:
    project = ingest_every_classification(client, admin)
    retrieved = client.post(
        "/api/v1/context/retrieve",
        headers=admin,
        json={"query": f"which runbook uses {AWS_KEY}?", "spaceId": project},
    )

    assert retrieved.status_code == 200
    sent = everything_sent(stand_in)
    assert marker("public") in sent
    assert marker("internal") in sent
    for protected in ["confidential", "restricted", "regulated"]:
        assert marker(protected) not in sent, f"{protected} reached a {endpoint['locality']} one"
    for planted in [AWS_KEY, "oncall@example.com", "7946 0958"]:
        assert planted not in sent
    assert "which runbook uses [REDACTED:aws_access_key]?" in sent


def test_confidential_and_restricted_mapped_to_redact_reach_only_an_internal_endpoint(
    client, endpoint, admin, stand_in
) -> None:
    policy = {"actions": dict.fromkeys(CLASSIFICATIONS, "redact")}
    assert client.put(POLICY, headers=admin, json=policy).status_code == 200

    ingest_every_classification(client, admin)

    sent = everything_sent(stand_in)
    protected = ["confidential", "restricted", "regulated"]
    if endpoint["locality"] == "internal":
        assert all(marker(c) in sent for c in protected)
    else:
        assert not any(marker(c) in sent for c in protected)
    assert AWS_KEY not in sent
    assert "oncall@example.com" not in sent


def test_status_reports_the_endpoints_locality(client, endpoint, admin) -> None:
    status = client.get("/api/v1/context/status", headers=admin).json()

    expected = "in_deployment" if endpoint["locality"] == "internal" else "external"
    assert status["embeddings"]["locality"] == expected


def test_a_slow_endpoint_gets_a_full_text_answer_that_says_so(client, admin, stand_in) -> None:
    project = ingest_every_classification(client, admin)
    stand_in.delay = 5.0  # longer than the runtime's 1 s query timeout

    retrieved = client.post(
        "/api/v1/context/retrieve",
        headers=admin,
        json={"query": f"rotation runbook {marker('public')}", "spaceId": project},
    )

    assert retrieved.status_code == 200
    body = retrieved.json()
    assert body["searchMode"] == "full_text"
    assert body["warnings"] == [DEGRADED_WARNING]
    assert "public.md" in [c["path"] for c in body["chunks"]], "full-text still finds it"
    row = attribution_row(body["attributionId"])
    assert row is not None
    assert json.loads(bytes(row["record"]))["searchMode"] == "full_text", "the evidence says so"


def test_an_endpoint_in_time_gets_a_hybrid_answer_without_warnings(client, admin) -> None:
    project = ingest_every_classification(client, admin)

    body = client.post(
        "/api/v1/context/retrieve", headers=admin, json={"query": "runbook", "spaceId": project}
    ).json()

    assert (body["searchMode"], body["warnings"]) == ("hybrid", [])
