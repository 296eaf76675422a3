"""``POST /api/context/{project_id}/batch`` (issue 28, item 3): up to 100 memories, validated
as single writes are, all or nothing in one transaction, the created ids in order, embedded in one
call through the DLP gate."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from api_support import TEMPLATE, bearer, error_of, runtime_env
from memory_support import (
    BASE,
    LATENCY,
    POSTGRES,
    PROJECT,
    grant,
    project_space_id,
    require_review,
    write,
)

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.local.runtime import LocalRuntime

BATCH = f"{BASE}/{PROJECT}/batch"
AWS_KEY = "AKIAQ3EGRTW5NB7XKP2M"
THREE = [
    {"content": POSTGRES, "type": "decision", "agent_key": "planner", "importance": 0.9},
    {"content": LATENCY, "type": "constraint", "metadata": {"ticket": "PERF-2"}},
    {"content": "Refunds above 500 EUR need a second approver."},
]


def listed(api: httpx.Client, headers: dict, project: str = PROJECT) -> list[dict]:
    response = api.get(f"{BASE}/{project}", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["memories"]


def test_a_batch_answers_the_created_ids_in_order_and_serves_each_as_a_single_write_would(
    api, admin_headers
) -> None:
    response = api.post(BATCH, headers=admin_headers, json={"memories": THREE})

    assert response.status_code == 201, response.text
    answer = response.json()
    assert answer == {
        "project_id": PROJECT,
        "ids": answer["ids"],
        "duplicates": [],
        "pending": [],
    }
    ids = answer["ids"]
    assert len(set(ids)) == 3
    memories = listed(api, admin_headers)
    assert [m["id"] for m in memories] == ids[::-1], "newest first: the last item is the newest"
    first, second, third = (
        api.get(f"{BASE}/{PROJECT}/{memory_id}", headers=admin_headers).json() for memory_id in ids
    )
    assert (first["content"], first["type"], first["agent_key"], first["importance"]) == (
        POSTGRES,
        "decision",
        "planner",
        0.9,
    )
    assert (second["type"], second["metadata"], second["confidence"]) == (
        "constraint",
        {"ticket": "PERF-2"},
        1.0,
    )
    assert (third["type"], third["importance"]) == ("fact", 0.5)
    assert all(m["created_at"] == m["updated_at"] for m in memories)
    relevant = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"limit": 9})
    assert {m["id"] for m in relevant.json()["memories"]} == set(ids)


def test_a_batch_creates_the_project_like_a_first_write(api, admin_headers) -> None:
    response = api.post(
        f"{BASE}/new-project/batch", headers=admin_headers, json={"memories": THREE}
    )

    assert response.status_code == 201
    assert len(listed(api, admin_headers, "new-project")) == 3


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"content": "  "}, "memories.2.content"),
        ({"content": "x", "importance": 2}, "memories.2.importance"),
        ({"content": "x", "type": "rumour"}, "memories.2.type"),
        ({"content": "x", "bogus": 1}, "memories.2.bogus"),
        ({"content": "x", "agent_key": "bad key"}, "memories.2.agent_key"),
        ({"content": "x", "dedupe": "yes"}, "memories.2.dedupe"),
        ({}, "memories.2.content"),
    ],
)
def test_a_bad_item_is_422_naming_its_position_and_nothing_is_written(
    api, admin_headers, item, field
) -> None:
    write(api, admin_headers, content="Kept.")

    response = api.post(BATCH, headers=admin_headers, json={"memories": [*THREE[:2], item]})

    assert error_of(response) == (422, "validation_failed")
    assert response.json()["error"]["message"].startswith(f"{field}: ")
    assert [m["content"] for m in listed(api, admin_headers)] == ["Kept."]


@pytest.mark.parametrize(
    "body",
    [{}, {"memories": []}, {"memories": [{"content": "x"}] * 101}, {"memories": THREE, "x": 1}],
)
def test_a_batch_holds_1_to_100_memories_and_nothing_else(api, admin_headers, body) -> None:
    response = api.post(BATCH, headers=admin_headers, json=body)

    assert error_of(response) == (422, "validation_failed")
    assert error_of(api.get(f"{BASE}/{PROJECT}", headers=admin_headers)) == (
        404,
        "memory.project.not_found",
    )


def test_a_batch_of_100_is_taken(api, admin_headers) -> None:
    memories = [{"content": f"Fact number {n}."} for n in range(100)]

    response = api.post(BATCH, headers=admin_headers, json={"memories": memories})

    assert response.status_code == 201, response.text
    assert len(response.json()["ids"]) == 100
    page = api.get(f"{BASE}/{PROJECT}", headers=admin_headers, params={"limit": 200}).json()
    assert [m["content"] for m in page["memories"]] == [m["content"] for m in memories[::-1]]


def test_a_scan_failure_on_any_item_leaves_nothing_of_the_batch(
    api, admin_headers, break_scans_of
) -> None:
    write(api, admin_headers, content="Kept.")
    space = project_space_id(api, admin_headers)
    before = api.get(f"/api/v1/context/spaces/{space}/sources", headers=admin_headers).json()
    break_scans_of("scan-breaker")

    response = api.post(
        BATCH,
        headers=admin_headers,
        json={"memories": [*THREE, {"content": "This one holds a scan-breaker."}]},
    )

    assert error_of(response) == (503, "context.dlp.scan_failed")
    assert [m["content"] for m in listed(api, admin_headers)] == ["Kept."]
    after = api.get(f"/api/v1/context/spaces/{space}/sources", headers=admin_headers).json()
    assert after == before, "no chunk, no counter, no source change was kept"
    retrieved = api.post(
        "/api/v1/context/retrieve",
        headers=admin_headers,
        json={"query": "Postgres MongoDB ranking joins", "spaceId": space},
    )
    assert retrieved.json()["chunks"] == []


def test_a_failed_batch_to_a_new_key_creates_no_project(api, admin_headers, break_scans_of) -> None:
    break_scans_of("scan-breaker")

    response = api.post(
        f"{BASE}/new-project/batch",
        headers=admin_headers,
        json={"memories": [{"content": "Fine."}, {"content": "scan-breaker"}]},
    )

    assert error_of(response) == (503, "context.dlp.scan_failed")
    assert error_of(api.get(f"{BASE}/new-project", headers=admin_headers)) == (
        404,
        "memory.project.not_found",
    )


def test_a_batch_needs_what_a_single_write_needs(api, org, other_org, token, admin_headers) -> None:
    write(api, admin_headers, content="Kept.")
    grant(api, admin_headers, project_space_id(api, admin_headers), "alice", "context:space:search")
    body = {"memories": THREE}

    searcher = api.post(BATCH, headers=bearer(token(org, "alice")), json=body)
    stranger = api.post(BATCH, headers=bearer(token(org, "mallory")), json=body)
    creator = api.post(
        f"{BASE}/new-project/batch", headers=bearer(token(org, "mallory")), json=body
    )
    foreign = api.post(
        BATCH, headers=bearer(token(other_org, "alice", SCOPE_CONTEXT_ADMIN)), json=body
    )

    assert error_of(searcher) == (403, "forbidden")
    assert error_of(stranger) == (404, "memory.project.not_found")
    assert error_of(creator) == (404, "memory.project.not_found"), "creating needs org admin"
    assert foreign.status_code == 201, "another organisation's key is its own project"
    assert [m["content"] for m in listed(api, admin_headers)] == ["Kept."]


def test_with_review_a_batch_waits_pending_and_answers_202(api, org, token, admin_headers) -> None:
    write(api, admin_headers, content="Kept.")
    grant(api, admin_headers, project_space_id(api, admin_headers), "alice", "context:space:search")
    require_review(api, admin_headers)
    alice = bearer(token(org, "alice"))

    response = api.post(BATCH, headers=alice, json={"memories": THREE[:2]})

    assert response.status_code == 202
    answer = response.json()
    assert (answer["duplicates"], answer["pending"]) == ([], [0, 1])
    assert [m["content"] for m in listed(api, alice)] == ["Kept."]
    for memory_id in answer["ids"]:
        revisions = api.get(f"{BASE}/{PROJECT}/{memory_id}/revisions", headers=alice).json()
        assert [(r["revision"], r["state"]) for r in revisions["revisions"]] == [(1, "pending")]
    accepted = api.post(
        f"{BASE}/{PROJECT}/{answer['ids'][1]}/revisions/1/accept", headers=admin_headers
    )
    assert accepted.json()["content"] == LATENCY


# --- through a real embeddings endpoint ------------------------------------------------------


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 32) as running:
        yield running


@pytest.fixture(scope="module")
def embedding_runtime(database_url, sqs_endpoint, local_keys, stand_in) -> Iterator[str]:
    env = runtime_env(
        database_url,
        local_keys,
        KEYSTONE_CONTEXT_EMBEDDINGS_URL=stand_in.url,
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="stand-in",
        KEYSTONE_CONTEXT_EMBEDDINGS_COOLDOWN_SECONDS="0",
    )
    with LocalRuntime(TEMPLATE, port=0, env=env, sqs_endpoint=sqs_endpoint) as running:
        yield running.url


@pytest.fixture
def embedded(embedding_runtime, db, stand_in) -> Iterator[httpx.Client]:
    stand_in.reset()
    with httpx.Client(base_url=embedding_runtime, timeout=60) as http:
        yield http


def test_a_batch_is_embedded_in_one_request_redacted_by_the_dlp_gate(
    embedded, admin_headers, stand_in
) -> None:
    secret = {"content": f"Deploys sign with AWS_ACCESS_KEY_ID={AWS_KEY}.", "type": "note"}

    response = embedded.post(BATCH, headers=admin_headers, json={"memories": [*THREE, secret]})

    assert response.status_code == 201, response.text
    [request] = stand_in.requests
    sent = request.body["input"]
    assert sent[:3] == [item["content"] for item in THREE]
    assert sent[3] == "Deploys sign with AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key]."
    found = embedded.get(
        f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"query": POSTGRES}
    ).json()["memories"]
    assert found[0]["id"] == response.json()["ids"][0]
    assert "stand-in" in found[0]["justification"]


def test_an_embeddings_endpoint_that_fails_leaves_nothing_of_the_batch(
    embedded, admin_headers, stand_in
) -> None:
    write(embedded, admin_headers, content="Kept.")
    stand_in.fail_next(503, times=20)

    response = embedded.post(BATCH, headers=admin_headers, json={"memories": THREE})

    assert response.status_code == 503, response.text
    stand_in.reset()
    assert [m["content"] for m in listed(embedded, admin_headers)] == ["Kept."]
