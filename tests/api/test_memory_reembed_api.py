"""Re-embedding through the real edge: memories written with the in-process hashing provider (no
endpoint), then the service configured with an embeddings endpoint of another model (the stand-in,
64 dimensions); /relevant warns until they are re-embedded by the route, the CLI or the
background job (MemoryReembedFunction, fired as its schedule and its deploy-time custom resource
fire it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import numpy as np
import pytest
from api_support import TEMPLATE, runtime_env
from memory_support import BASE, LATENCY, POSTGRES, PROJECT, QUERY

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.cli import main
from context_ledger.db import connection
from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.local.runtime import LocalRuntime
from context_ledger.memory import service
from context_ledger.memory.embedding import MemoryEmbedder
from context_ledger.settings import load_settings

REEMBED = "/api/v1/context/memories/reembed"
FIELDS = {"type": "fact", "confidence": 1.0, "importance": 0.5, "metadata": {}}


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 64) as running:
        yield running


@pytest.fixture(scope="module")
def configured(database_url, sqs_endpoint, local_keys, stand_in) -> Iterator[LocalRuntime]:
    env = runtime_env(
        database_url,
        local_keys,
        KEYSTONE_CONTEXT_EMBEDDINGS_URL=stand_in.url,
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="stand-in",
        KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS="64",
        KEYSTONE_CONTEXT_EMBEDDINGS_COOLDOWN_SECONDS="0",
    )
    with LocalRuntime(
        TEMPLATE, port=0, env=env, sqs_endpoint=sqs_endpoint, timed_schedules=False
    ) as running:
        yield running


@pytest.fixture
def http(configured, db, stand_in) -> Iterator[httpx.Client]:
    stand_in.reset()
    with httpx.Client(base_url=configured.url, timeout=60) as client:
        yield client


def seed_with_hashing(org, contents: list[str], project: str = PROJECT) -> list[str]:
    """Memories as a service without an endpoint wrote them (the in-process hashing provider)."""
    hashing = HashingEmbeddingProvider()
    deps = service.Dependencies(
        settings=load_settings(),
        embedder=MemoryEmbedder(
            embedder=hashing, name=hashing.name, dimensions=hashing.dimensions, client=None
        ),
    )
    admin = Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )
    items = [service.NewMemory(fields=FIELDS | {"content": c}) for c in contents]
    with connection() as conn:
        return service.create_memories(conn, admin, project, items=items, deps=deps).ids


def relevant(http: httpx.Client, headers: dict) -> dict:
    response = http.get(f"{BASE}/{PROJECT}/relevant", headers=headers, params={"query": QUERY})
    assert response.status_code == 200, response.text
    return response.json()


def test_relevant_warns_until_the_route_has_reembedded_them_with_the_new_models_similarities(
    http, org, admin_headers
) -> None:
    ids = seed_with_hashing(org, [POSTGRES, LATENCY])
    before = relevant(http, admin_headers)
    assert [m["similarity"] for m in before["memories"]] == [0.0, 0.0]
    assert before["warnings"] == [
        "2 memories of this project are not yet re-embedded with stand-in, 64d: their similarity "
        "is 0.00 (incompatible vectors) until re-embedding reaches them; it runs in the "
        "background, and `context-ledger memories reembed` runs it now"
    ]

    response = http.post(REEMBED, headers=admin_headers, json={"projectId": PROJECT})

    assert response.status_code == 200, response.text
    assert response.json() == {
        "reembedded": 2,
        "remaining": 0,
        "withheld": 0,
        "model": "stand-in, 64d",
    }
    after = relevant(http, admin_headers)
    assert set(after) == {"project_id", "query", "memories"}  # the spec's answer, no warning
    stand_in_model = HashingEmbeddingProvider(64)
    query, *vectors = (np.array(v) for v in stand_in_model.embed([QUERY, POSTGRES, LATENCY]))
    expected = {i: round(max(0.0, float(query @ v)), 4) for i, v in zip(ids, vectors, strict=True)}
    assert {m["id"]: m["similarity"] for m in after["memories"]} == expected
    assert {m["justification"] for m in after["memories"]} >= {
        f"semantic similarity {expected[ids[0]]:.2f} (stand-in, 64d)"
    }


def test_the_route_does_a_bounded_share_per_call(http, org, admin_headers) -> None:
    seed_with_hashing(org, [f"Memory number {i}." for i in range(5)])

    first = http.post(REEMBED, headers=admin_headers, json={"limit": 2}).json()
    second = http.post(REEMBED, headers=admin_headers, json={"limit": 10}).json()

    assert (first["reembedded"], first["remaining"]) == (2, 3)
    assert (second["reembedded"], second["remaining"]) == (3, 0)


def test_reembedding_every_project_needs_the_context_admin_scope(
    http, org, token, admin_headers
) -> None:
    seed_with_hashing(org, [POSTGRES])
    no_scope = {"Authorization": f"Bearer {token(org, 'someone')}"}

    response = http.post(REEMBED, headers=no_scope, json={})

    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "forbidden"
    assert http.post(REEMBED, headers=no_scope, json={"projectId": PROJECT}).status_code == 404


def test_the_background_job_reembeds_every_project_and_then_finds_nothing(
    configured, http, org, admin_headers, stand_in
) -> None:
    seed_with_hashing(org, [POSTGRES, LATENCY])
    seed_with_hashing(org, ["Another project's memory."], project="checkout")

    result = configured.fire("MemoryReembedFunction")

    assert {k: result[k] for k in ("reembedded", "remaining", "withheld")} == {
        "reembedded": 3,
        "remaining": 0,
        "withheld": 0,
    }
    assert "warnings" not in relevant(http, admin_headers)
    stand_in.reset()
    assert configured.fire("MemoryReembedFunction")["reembedded"] == 0
    assert stand_in.requests == []


@pytest.fixture
def cloudformation() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback stand-in for the pre-signed S3 URL CloudFormation waits on."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/response?X-Amz-Signature=abc", received
    finally:
        server.shutdown()
        server.server_close()


def custom_resource_event(request_type: str, response_url: str) -> dict[str, Any]:
    return {
        "RequestType": request_type,
        "ResponseURL": response_url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/ctxl/1",
        "RequestId": "r-1",
        "LogicalResourceId": "MemoryReembedAfterDeploy",
        "ResourceType": "Custom::MemoryReembed",
        "ResourceProperties": {"EmbeddingsModel": "stand-in", "EmbeddingsDimensions": "64"},
    }


def test_a_deploy_that_changes_the_model_is_answered_at_once_and_then_reembeds(
    configured, http, org, cloudformation
) -> None:
    url, received = cloudformation
    seed_with_hashing(org, [POSTGRES, LATENCY])

    result = configured.invoke("MemoryReembedFunction", custom_resource_event("Update", url))

    assert [(r["Status"], r["PhysicalResourceId"]) for r in received] == [
        ("SUCCESS", "context-ledger-memory-reembed")
    ]
    assert result["reembedded"] == 2


def test_deleting_the_custom_resource_is_answered_and_changes_nothing(
    configured, http, org, cloudformation, stand_in
) -> None:
    url, received = cloudformation
    seed_with_hashing(org, [POSTGRES])

    result = configured.invoke("MemoryReembedFunction", custom_resource_event("Delete", url))

    assert [r["Status"] for r in received] == ["SUCCESS"]
    assert result["reembedded"] == 0
    assert stand_in.requests == []


def test_the_cli_reembeds_with_progress_and_reports_the_rate(
    configured, http, org, admin_headers, capsys
) -> None:
    seed_with_hashing(org, [f"Memory number {i}." for i in range(7)])
    admin_token = admin_headers["Authorization"].removeprefix("Bearer ")

    code = main(
        ["memories", "reembed", "--url", configured.url, "--token", admin_token, "--batch", "3"]
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith("re-embedded 7 memories with stand-in, 64d in ")
    assert "memories/s)" in out
    assert "7/7 memories" in err  # the progress bar's total, reached
    assert "warnings" not in relevant(http, admin_headers)


def test_the_cli_names_the_services_refusal(configured, http, org, token, capsys) -> None:
    code = main(["memories", "reembed", "--url", configured.url, "--token", token(org, "someone")])

    assert code == 1
    assert "403 forbidden" in capsys.readouterr().err
