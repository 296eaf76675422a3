"""The memory API over HTTP (spec: memory-relevant-api): writes, revisions, the list, /relevant,
permissions, errors and team memory in the context API."""

from __future__ import annotations

import json
import re
import time

import httpx
import pytest
from api_support import attribution_row, bearer, error_of
from memory_support import (
    BASE,
    LATENCY,
    POSTGRES,
    PROJECT,
    QUERY,
    STORED_FIELDS,
    grant,
    project_space_id,
    require_review,
    write,
)

from context_ledger.auth.api_keys import create_api_key
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection
from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.embeddings.similarity import cosine
from context_ledger.settings import get_settings


def spec_memories(api: httpx.Client, headers: dict) -> tuple[dict, dict]:
    first = write(
        api,
        headers,
        content=POSTGRES,
        type="decision",
        agent_key="planner",
        confidence=0.8,
        importance=0.9,
        metadata={"ticket": "ARCH-14"},
    )
    second = write(api, headers, content=LATENCY, type="constraint", importance=0.8)
    return first, second


# --- write -----------------------------------------------------------------------------------


def test_the_first_write_creates_the_project_and_answers_the_stored_memory(
    api, org, admin_headers
) -> None:
    before = time.time()

    memory = write(
        api,
        admin_headers,
        content=POSTGRES,
        type="decision",
        agent_key="planner",
        confidence=0.8,
        importance=0.9,
        metadata={"ticket": "ARCH-14"},
    )

    assert list(memory) == STORED_FIELDS
    assert re.fullmatch(r"ctx_[0-9a-f]{12}", memory["id"])
    assert memory | {"id": None, "created_at": None, "updated_at": None} == {
        "id": None,
        "org_id": str(org.id),
        "project_id": PROJECT,
        "agent_key": "planner",
        "type": "decision",
        "content": POSTGRES,
        "confidence": 0.8,
        "importance": 0.9,
        "access_count": 0,
        "last_accessed_at": None,
        "created_at": None,
        "updated_at": None,
        "metadata": {"ticket": "ARCH-14"},
    }
    assert isinstance(memory["created_at"], float)
    assert before - 5 < memory["created_at"] == memory["updated_at"] < time.time() + 5
    space = api.get(
        f"/api/v1/context/spaces/{project_space_id(api, admin_headers)}", headers=admin_headers
    ).json()
    assert (space["level"], space["key"], space["name"]) == ("project", PROJECT, PROJECT)


def test_a_write_without_optional_fields_gets_the_documented_defaults(api, admin_headers) -> None:
    memory = write(api, admin_headers, content="Invoices are numbered per year.")

    assert (memory["type"], memory["agent_key"], memory["confidence"], memory["importance"]) == (
        "fact",
        None,
        1.0,
        0.5,
    )
    assert memory["metadata"] == {}


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"content": ""},
        {"content": "   "},
        {"content": "x", "type": "gossip"},
        {"content": "x", "confidence": 1.5},
        {"content": "x", "importance": -0.1},
        {"content": "x", "importance": "0.5"},
        {"content": "x", "importance": True},
        {"content": "x", "metadata": ["not", "an", "object"]},
        {"content": "x", "metadata": {"big": "y" * 20_000}},
        {"content": "x", "agent_key": "has spaces"},
        {"content": "x", "embedding": [0.1, 0.2]},
        {"content": "x" * 32_001},
    ],
    ids=[
        "no content",
        "empty content",
        "blank content",
        "unknown type",
        "confidence above 1",
        "importance below 0",
        "importance as text",
        "importance as boolean",
        "metadata not an object",
        "metadata too big",
        "bad agent key",
        "unknown field",
        "content too long",
    ],
)
def test_a_bad_write_is_422_and_creates_nothing(api, admin_headers, body) -> None:
    response = api.post(f"{BASE}/{PROJECT}", headers=admin_headers, json=body)

    assert error_of(response) == (422, "validation_failed")
    assert api.get(f"{BASE}/{PROJECT}", headers=admin_headers).status_code == 404


@pytest.mark.parametrize(
    "agent_key",
    [
        "AKIAQ3EGRTW5NB7XKP2M",
        "ghp_" + "aB3" * 12,
        "bot/wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "planner:sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    ],
    ids=["aws access key", "github token", "aws secret key in a path", "stripe key after a name"],
)
def test_an_agent_key_holding_a_credential_is_422_and_never_echoed(
    api, admin_headers, agent_key
) -> None:
    """Agent keys are identifiers, delivered as written to every reader of the project (and
    in retrieval chunks' metadata): a credential in one is refused, not stored."""
    response = api.post(
        f"{BASE}/{PROJECT}", headers=admin_headers, json={"content": "x", "agent_key": agent_key}
    )

    assert error_of(response) == (422, "validation_failed")
    assert agent_key not in response.text
    assert "agent_key" in response.text
    assert api.get(f"{BASE}/{PROJECT}", headers=admin_headers).status_code == 404


def test_agent_keys_that_name_agents_are_accepted(api, admin_headers) -> None:
    for agent_key in ("planner", "claude-code/session-42", "ci:nightly@runner-7", "Agent_2026"):
        memory = write(api, admin_headers, content=f"from {agent_key}", agent_key=agent_key)
        assert memory["agent_key"] == agent_key


def test_an_unnamed_aws_shaped_key_in_a_memory_is_delivered_redacted(api, admin_headers) -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    memory = write(api, admin_headers, content=f'deploy notes: aws = "{secret}"')

    assert secret not in json.dumps(memory)
    listed = api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json()["memories"]
    assert secret not in json.dumps(listed)
    assert "[REDACTED:" in listed[0]["content"]


@pytest.mark.parametrize(
    "project", ["AKIAQ3EGRTW5NB7XKP2M", "ghp_" + "aB3" * 12], ids=["aws key", "github token"]
)
def test_a_project_key_holding_a_credential_is_422_and_never_echoed(
    api, admin_headers, project
) -> None:
    """A project key is echoed in every answer about the project: like an agent key, one that
    holds a credential is refused, and no project is made."""
    response = api.post(f"{BASE}/{project}", headers=admin_headers, json={"content": "x"})

    assert error_of(response) == (422, "validation_failed")
    assert project not in response.text
    assert "project_id" in response.text
    assert api.get(f"{BASE}/{project}", headers=admin_headers).status_code == 404


def test_a_project_key_random_by_design_is_accepted(api, admin_headers) -> None:
    """Only credentials of a known kind are refused: a key that merely looks random (a service
    and a ULID) names a project."""
    project = "svc-01HZX3K9Q2W8E7R6T5Y4U3I2O1"
    memory = write(api, admin_headers, project=project, content="Deploys on Tuesdays.")

    assert memory["project_id"] == project


def test_metadata_under_a_credential_key_is_delivered_redacted_on_every_route(
    api, admin_headers
) -> None:
    metadata = {
        "ticket": "OPS-12",
        "password": "Summer2024!Muc",
        "db": {"client_secret": "Cl13nt-S3cr3t-v4lu3"},
    }
    memory = write(
        api, admin_headers, content="Staging database credentials rotated.", metadata=metadata
    )

    listed = api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json()["memories"]
    relevant = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers).json()["memories"]
    one = api.get(f"{BASE}/{PROJECT}/{memory['id']}", headers=admin_headers).json()
    for answer in (memory, listed[0], relevant[0], one):
        assert answer["metadata"] == {
            "ticket": "OPS-12",
            "password": "[REDACTED:password]",
            "db": {"client_secret": "[REDACTED:secret]"},
        }


def test_relevant_echoes_the_query_redacted(api, admin_headers) -> None:
    """The spec's ``query`` echo names the query as it was searched for: a key or an address
    pasted into it does not come back (as MCP's search_memories names it)."""
    write(api, admin_headers, content="The staging database is Postgres 16.")
    query = "staging db password Tr0ub4dor&3 AKIAQ3EGRTW5NB7XKP2M jane.doe@acme-corp.com"

    answer = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"query": query})

    assert answer.status_code == 200
    echoed = answer.json()["query"]
    assert echoed.startswith("staging db password ")
    for secret in ("Tr0ub4dor&3", "AKIAQ3EGRTW5NB7XKP2M", "jane.doe@acme-corp.com"):
        assert secret not in answer.text
    plain = api.get(
        f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"query": "which database"}
    )
    assert plain.json()["query"] == "which database"


def test_non_finite_numbers_in_metadata_are_422(api, admin_headers) -> None:
    response = api.post(
        f"{BASE}/{PROJECT}",
        headers={**admin_headers, "Content-Type": "application/json"},
        content=b'{"content": "x", "metadata": {"ratio": NaN}}',
    )

    assert error_of(response) == (422, "validation_failed")


def test_a_body_that_is_not_json_is_400(api, admin_headers) -> None:
    response = api.post(
        f"{BASE}/{PROJECT}",
        headers={**admin_headers, "Content-Type": "application/json"},
        content=b"{not json",
    )

    assert error_of(response) == (400, "invalid_request")


def test_a_project_key_that_cannot_exist_is_422_on_write(api, admin_headers) -> None:
    response = api.post(f"{BASE}/-leading-dash", headers=admin_headers, json={"content": "x"})

    assert error_of(response) == (422, "validation_failed")


def test_a_body_naming_another_organisation_is_403(api, org, other_org, admin_headers) -> None:
    response = api.post(
        f"{BASE}/{PROJECT}",
        headers=admin_headers,
        json={"content": "x", "org_id": str(other_org.id)},
    )

    assert error_of(response) == (403, "forbidden")


# --- authentication, permissions, tenancy -----------------------------------------------------


def test_a_missing_or_invalid_credential_is_401_never_an_empty_list(api, admin_headers) -> None:
    write(api, admin_headers, content=POSTGRES)

    for headers in ({}, bearer("not-a-token"), bearer("ctxl_unknown")):
        for response in (
            api.get(f"{BASE}/{PROJECT}", headers=headers),
            api.get(f"{BASE}/{PROJECT}/relevant", headers=headers),
            api.post(f"{BASE}/{PROJECT}", headers=headers, json={"content": "x"}),
        ):
            assert response.status_code == 401
            assert "memories" not in response.json()
            if headers:  # without a header API Gateway answers before any function runs
                assert error_of(response) == (401, "unauthorized")


def test_an_unknown_project_key_is_404_for_every_read(api, admin_headers) -> None:
    for path in (
        f"{BASE}/nope",
        f"{BASE}/nope/relevant",
        f"{BASE}/nope/ctx_000000000000/revisions",
    ):
        assert error_of(api.get(path, headers=admin_headers)) == (404, "memory.project.not_found")


def test_another_organisations_project_key_is_404(api, org, other_org, token) -> None:
    ours = bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))
    theirs = bearer(token(other_org, "root", SCOPE_CONTEXT_ADMIN))
    memory = write(api, ours, content=POSTGRES)

    for response in (
        api.get(f"{BASE}/{PROJECT}", headers=theirs),
        api.get(f"{BASE}/{PROJECT}/relevant", headers=theirs),
        api.patch(f"{BASE}/{PROJECT}/{memory['id']}", headers=theirs, json={"content": "x"}),
        api.delete(f"{BASE}/{PROJECT}/{memory['id']}", headers=theirs),
        api.post(f"{BASE}/{PROJECT}/{memory['id']}/access", headers=theirs),
    ):
        assert error_of(response) == (404, "memory.project.not_found")
    # the other organisation's first write creates its own project under the same key
    other = write(api, theirs, content="Globex keeps its own memories.")
    listed = api.get(f"{BASE}/{PROJECT}", headers=ours).json()["memories"]
    assert [m["id"] for m in listed] == [memory["id"]]
    assert other["org_id"] == str(other_org.id)


def test_a_caller_without_any_permission_is_denied_like_an_unknown_key(
    api, org, token, admin_headers
) -> None:
    memory = write(api, admin_headers, content=POSTGRES)
    mallory = bearer(token(org, "mallory"))

    for response in (
        api.get(f"{BASE}/{PROJECT}", headers=mallory),
        api.get(f"{BASE}/{PROJECT}/relevant", headers=mallory),
        api.post(f"{BASE}/{PROJECT}", headers=mallory, json={"content": "x"}),
        api.patch(f"{BASE}/{PROJECT}/{memory['id']}", headers=mallory, json={"content": "x"}),
        api.post(f"{BASE}/{PROJECT}/{memory['id']}/access", headers=mallory),
    ):
        assert error_of(response) == (404, "memory.project.not_found")


def test_only_an_organisation_admin_creates_a_project(api, org, token, admin_headers) -> None:
    alice = bearer(token(org, "alice"))
    root = next(
        s["id"]
        for s in api.get("/api/v1/context/spaces", headers=admin_headers).json()["spaces"]
        if s["level"] == "organisation"
    )
    grant(api, admin_headers, root, "alice", "context:space:search")

    refused = api.post(f"{BASE}/new-project", headers=alice, json={"content": "x"})

    assert error_of(refused) == (404, "memory.project.not_found")
    grant(api, admin_headers, root, "alice", "context:space:admin")
    assert write(api, alice, project="new-project", content="x")["project_id"] == "new-project"


def test_a_searcher_reads_but_needs_admin_on_the_project_to_write(
    api, org, token, admin_headers
) -> None:
    memory = write(api, admin_headers, content=POSTGRES)
    grant(api, admin_headers, project_space_id(api, admin_headers), "alice", "context:space:search")
    alice = bearer(token(org, "alice"))

    assert api.get(f"{BASE}/{PROJECT}", headers=alice).status_code == 200
    assert api.get(f"{BASE}/{PROJECT}/relevant", headers=alice).status_code == 200
    assert api.post(f"{BASE}/{PROJECT}/{memory['id']}/access", headers=alice).status_code == 200
    for response in (
        api.post(f"{BASE}/{PROJECT}", headers=alice, json={"content": "x"}),
        api.patch(f"{BASE}/{PROJECT}/{memory['id']}", headers=alice, json={"content": "x"}),
        api.delete(f"{BASE}/{PROJECT}/{memory['id']}", headers=alice),
    ):
        assert error_of(response) == (403, "forbidden")


def test_an_api_key_works_like_a_token(api, org) -> None:
    with connection() as conn:
        issued = create_api_key(
            conn, org_id=org.id, user_id="planner", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
        )

    memory = write(api, bearer(issued.key), content=POSTGRES)

    listed = api.get(f"{BASE}/{PROJECT}", headers=bearer(issued.key)).json()["memories"]
    assert [m["id"] for m in listed] == [memory["id"]]


# --- revisions, patch, delete, access ------------------------------------------------------------


def test_every_change_is_a_revision_and_the_accepted_one_is_served(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES, importance=0.9)
    time.sleep(0.01)

    patched = api.patch(
        f"{BASE}/{PROJECT}/{memory['id']}",
        headers=admin_headers,
        json={"content": "We use Postgres 18.", "importance": 0.95},
    )

    assert patched.status_code == 200, patched.text
    assert patched.json() | {"updated_at": None} == memory | {
        "content": "We use Postgres 18.",
        "importance": 0.95,
        "updated_at": None,
    }
    assert patched.json()["updated_at"] > memory["updated_at"]
    revisions = api.get(f"{BASE}/{PROJECT}/{memory['id']}/revisions", headers=admin_headers)
    assert [(r["revision"], r["state"], r["content"]) for r in revisions.json()["revisions"]] == [
        (1, "superseded", POSTGRES),
        (2, "accepted", "We use Postgres 18."),
    ]
    served = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers).json()["memories"]
    assert [m["content"] for m in served] == ["We use Postgres 18."]


def test_a_patch_that_changes_nothing_adds_no_revision(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES, importance=0.9)

    same = api.patch(
        f"{BASE}/{PROJECT}/{memory['id']}", headers=admin_headers, json={"importance": 0.9}
    )

    assert same.json() == memory
    revisions = api.get(f"{BASE}/{PROJECT}/{memory['id']}/revisions", headers=admin_headers)
    assert len(revisions.json()["revisions"]) == 1


@pytest.mark.parametrize(
    "body",
    [{}, {"content": None}, {"agent_key": "other"}, {"importance": 2}],
    ids=["empty", "null", "agent_key is not revisable", "out of range"],
)
def test_a_bad_patch_is_422(api, admin_headers, body) -> None:
    memory = write(api, admin_headers, content=POSTGRES)

    response = api.patch(f"{BASE}/{PROJECT}/{memory['id']}", headers=admin_headers, json=body)

    assert error_of(response) == (422, "validation_failed")


def test_unknown_memory_ids_are_404(api, admin_headers) -> None:
    write(api, admin_headers, content=POSTGRES)

    for memory_id in ("ctx_000000000000", "not-an-id"):
        for response in (
            api.patch(
                f"{BASE}/{PROJECT}/{memory_id}", headers=admin_headers, json={"content": "x"}
            ),
            api.delete(f"{BASE}/{PROJECT}/{memory_id}", headers=admin_headers),
            api.post(f"{BASE}/{PROJECT}/{memory_id}/access", headers=admin_headers),
            api.get(f"{BASE}/{PROJECT}/{memory_id}/revisions", headers=admin_headers),
        ):
            assert error_of(response) == (404, "memory.not_found")


def test_a_deleted_memory_is_no_longer_served_anywhere(api, admin_headers) -> None:
    kept, gone = spec_memories(api, admin_headers)

    deleted = api.delete(f"{BASE}/{PROJECT}/{gone['id']}", headers=admin_headers)

    assert deleted.status_code == 204
    listed = api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json()["memories"]
    relevant = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers).json()["memories"]
    assert [m["id"] for m in listed] == [m["id"] for m in relevant] == [kept["id"]]
    again = api.delete(f"{BASE}/{PROJECT}/{gone['id']}", headers=admin_headers)
    assert error_of(again) == (404, "memory.not_found")


def test_only_an_explicit_access_raises_access_count_and_it_leaves_updated_at(
    api, admin_headers
) -> None:
    memory = write(api, admin_headers, content=POSTGRES)

    first = api.post(f"{BASE}/{PROJECT}/{memory['id']}/access", headers=admin_headers).json()
    second = api.post(f"{BASE}/{PROJECT}/{memory['id']}/access", headers=admin_headers).json()

    assert (first["access_count"], second["access_count"]) == (1, 2)
    assert memory["created_at"] < first["last_accessed_at"] <= second["last_accessed_at"]
    assert second["updated_at"] == memory["updated_at"]


# --- list --------------------------------------------------------------------------------------


def test_the_list_is_newest_first_without_scoring_fields(api, admin_headers) -> None:
    first, second = spec_memories(api, admin_headers)

    listed = api.get(f"{BASE}/{PROJECT}", headers=admin_headers)

    assert listed.status_code == 200
    assert listed.json() == {"project_id": PROJECT, "memories": [second, first]}


def test_the_list_filters_by_type_agent_and_substring(api, admin_headers) -> None:
    first, second = spec_memories(api, admin_headers)

    def ids(**params) -> list[str]:
        body = api.get(f"{BASE}/{PROJECT}", headers=admin_headers, params=params).json()
        return [m["id"] for m in body["memories"]]

    assert ids(type="constraint") == [second["id"]]
    assert ids(agent="planner") == [first["id"]]
    assert ids(q="MONGODB") == [first["id"]]
    assert ids(q="200 ms", type="decision") == []
    assert ids(q="%") == []  # a substring, not a pattern
    error = api.get(f"{BASE}/{PROJECT}", headers=admin_headers, params={"type": "gossip"})
    assert error_of(error) == (422, "validation_failed")


def test_the_list_pages_with_offset_and_caps_limit_at_200(api, admin_headers) -> None:
    written = [write(api, admin_headers, content=f"memory {i}")["id"] for i in range(3)]

    def ids(**params) -> list[str]:
        body = api.get(f"{BASE}/{PROJECT}", headers=admin_headers, params=params).json()
        return [m["id"] for m in body["memories"]]

    assert ids(limit=2) == written[::-1][:2]
    assert ids(limit=2, offset=2) == written[:1]
    assert ids(limit=100_000) == written[::-1]
    for bad in ({"limit": 0}, {"offset": -1}, {"limit": "many"}):
        response = api.get(f"{BASE}/{PROJECT}", headers=admin_headers, params=bad)
        assert error_of(response) == (422, "validation_failed")


# --- relevant ----------------------------------------------------------------------------------


def test_relevant_reproduces_the_spec_example(api, org, admin_headers) -> None:
    first, second = spec_memories(api, admin_headers)
    hashing = HashingEmbeddingProvider()
    query_vector = hashing.embed_text(QUERY)
    expected_similarity = max(0.0, cosine(query_vector, hashing.embed_text(POSTGRES)))
    other_similarity = max(0.0, cosine(query_vector, hashing.embed_text(LATENCY)))

    response = api.get(
        f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"query": QUERY, "limit": 2}
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["project_id"], body["query"]) == (PROJECT, QUERY)
    top, other = body["memories"]
    # fresh and never accessed: recency 1.0, frequency 0.0 (docs/decisions.md)
    assert top == first | {
        "score": round(0.40 * expected_similarity + 0.20 + 0.25 * 0.9, 4),
        "similarity": round(expected_similarity, 4),
        "justification": (
            f"semantic similarity {expected_similarity:.2f} (HashingEmbeddingProvider, 128d)"
        ),
    }
    assert other == second | {
        "score": round(0.40 * other_similarity + 0.20 + 0.25 * 0.8, 4),
        "similarity": round(other_similarity, 4),
        "justification": (
            f"semantic similarity {other_similarity:.2f} (HashingEmbeddingProvider, 128d)"
        ),
    }
    assert "embedding" not in top


def test_an_empty_query_gives_every_memory_similarity_one(api, admin_headers) -> None:
    first, second = spec_memories(api, admin_headers)

    body = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers).json()

    assert body["query"] == ""
    assert [(m["id"], m["similarity"]) for m in body["memories"]] == [
        (first["id"], 1.0),
        (second["id"], 1.0),
    ]
    assert body["memories"][0]["score"] == round(0.40 + 0.20 + 0.25 * 0.9, 4)
    assert body["memories"][0]["justification"] == (
        "empty query: similarity 1.00 for every memory (HashingEmbeddingProvider, 128d)"
    )


def test_relevant_has_no_floor_and_no_limit_cap(api, admin_headers) -> None:
    for i in range(7):
        write(api, admin_headers, content=f"unrelated note number {i}", importance=0.0)

    default = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"query": QUERY})
    everything = api.get(
        f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"query": QUERY, "limit": 500}
    )

    assert len(default.json()["memories"]) == 5
    assert len(everything.json()["memories"]) == 7
    for bad in ({"limit": 0}, {"limit": -1}, {"min_score": 2}, {"token_budget": 0}):
        response = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params=bad)
        assert error_of(response) == (422, "validation_failed")


def test_relevant_never_mutates_and_answers_the_same_twice(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES)
    api.post(f"{BASE}/{PROJECT}/{memory['id']}/access", headers=admin_headers)
    before = api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json()

    answers = [
        api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"query": q}).json()
        for q in (QUERY, QUERY, "")
    ]

    assert api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json() == before
    assert answers[0] == answers[1]
    served = answers[0]["memories"][0]
    assert {k: served[k] for k in STORED_FIELDS} == before["memories"][0]


def test_accesses_raise_the_score_through_frequency(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES, importance=0.5)

    def score() -> float:
        body = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers).json()
        return body["memories"][0]["score"]

    before = score()
    for _ in range(10):
        api.post(f"{BASE}/{PROJECT}/{memory['id']}/access", headers=admin_headers)

    # ten accesses: frequency 10 / (10 + 10) = 0.5, worth 0.15 * 0.5 of the score
    assert score() == pytest.approx(before + 0.075, abs=2e-4)


def test_min_score_and_token_budget_are_opt_in(api, admin_headers) -> None:
    first, second = spec_memories(api, admin_headers)
    plain = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers).json()

    floor = api.get(
        f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"min_score": 0.8}
    ).json()
    budget = api.get(
        f"{BASE}/{PROJECT}/relevant", headers=admin_headers, params={"token_budget": 14}
    ).json()

    assert "tokens_used" not in plain
    assert [m["id"] for m in plain["memories"]] == [first["id"], second["id"]]
    assert [m["id"] for m in floor["memories"]] == [first["id"]]  # 0.825 vs 0.8
    # the first memory (15 tokens) does not fit in 14; the second (14) does
    assert [m["id"] for m in budget["memories"]] == [second["id"]]
    assert budget["tokens_used"] == 14


def test_the_rate_limit_answers_429_per_credential(api, org, token, admin_headers, monkeypatch):
    write(api, admin_headers, content=POSTGRES)
    monkeypatch.setenv("VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE", "2")
    get_settings.cache_clear()
    try:
        limited = bearer(token(org, "busy-agent", SCOPE_CONTEXT_ADMIN))
        answers = [api.get(f"{BASE}/{PROJECT}", headers=limited) for _ in range(3)]
        other = api.get(
            f"{BASE}/{PROJECT}", headers=bearer(token(org, "calm-agent", SCOPE_CONTEXT_ADMIN))
        )
    finally:
        monkeypatch.delenv("VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE")
        get_settings.cache_clear()

    assert [a.status_code for a in answers[:2]] == [200, 200]
    assert error_of(answers[2]) == (429, "rate_limited")
    assert other.status_code == 200


# --- team memory in the context API ---------------------------------------------------------------


def test_retrieve_serves_team_memory_and_attributes_entry_and_revision(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES, type="decision")
    api.patch(
        f"{BASE}/{PROJECT}/{memory['id']}",
        headers=admin_headers,
        json={"content": "We use Postgres, not MongoDB: the ranking query needs joins."},
    )

    response = api.post(
        "/api/v1/context/retrieve",
        headers=admin_headers,
        json={"query": "postgres joins", "spaceId": project_space_id(api, admin_headers)},
    )

    assert response.status_code == 200, response.text
    answer = response.json()
    (chunk,) = answer["chunks"]
    assert chunk["kind"] == "custom"
    assert chunk["content"] == "We use Postgres, not MongoDB: the ranking query needs joins."
    assert chunk["metadata"]["memoryId"] == memory["id"]
    assert chunk["metadata"]["memoryRevision"] == 2
    row = attribution_row(answer["attributionId"])
    assert row is not None, "the writer appended the record within 15 s"
    (entry,) = json.loads(bytes(row["record"]))["chunks"]
    assert (entry["memoryId"], entry["memoryRevision"]) == (memory["id"], 2)


def test_a_cached_search_never_outlives_a_memory_write(api, admin_headers) -> None:
    """Within the cache's 60 s: an edited memory is served edited (it used to vanish), a new
    one is found, a deleted one is gone."""
    edited = write(api, admin_headers, content=POSTGRES, type="decision")
    space = project_space_id(api, admin_headers)

    def found() -> dict[str, str]:
        answer = api.post(
            "/api/v1/context/retrieve",
            headers=admin_headers,
            json={"query": "postgres joins", "spaceId": space},
        ).json()
        return {c["metadata"]["memoryId"]: c["content"] for c in answer["chunks"]}

    assert found() == {edited["id"]: POSTGRES}
    changed = "We use Postgres, not MongoDB: the ranking query needs joins."
    patched = api.patch(
        f"{BASE}/{PROJECT}/{edited['id']}", headers=admin_headers, json={"content": changed}
    )
    assert patched.status_code == 200, patched.text
    assert found() == {edited["id"]: changed}

    added = write(api, admin_headers, content="Postgres joins feed the ranking query too.")
    assert found() == {edited["id"]: changed, added["id"]: added["content"]}

    assert api.delete(f"{BASE}/{PROJECT}/{edited['id']}", headers=admin_headers).status_code == 204
    assert found() == {added["id"]: added["content"]}


def test_a_deleted_memory_source_is_replaced_on_the_next_write(api, admin_headers) -> None:
    kept = write(api, admin_headers, content=POSTGRES)
    space = project_space_id(api, admin_headers)
    (source,) = api.get(f"/api/v1/context/spaces/{space}/sources", headers=admin_headers).json()[
        "sources"
    ]
    deleted = api.delete(f"/api/v1/context/sources/{source['id']}", headers=admin_headers)
    assert deleted.status_code == 204

    listed = api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json()["memories"]
    added = write(api, admin_headers, content="Invoices are numbered per year.")

    assert [m["id"] for m in listed] == [kept["id"]]
    sources = api.get(f"/api/v1/context/spaces/{space}/sources", headers=admin_headers).json()
    assert [(s["kind"], s["name"]) for s in sources["sources"]] == [
        ("custom", f"Memories of {PROJECT}")
    ]
    answer = api.post(
        "/api/v1/context/retrieve",
        headers=admin_headers,
        json={"query": "invoices numbered", "spaceId": space},
    ).json()
    assert [c["metadata"]["memoryId"] for c in answer["chunks"]] == [added["id"]]


# --- review ------------------------------------------------------------------------------------


def test_with_review_a_searchers_proposal_waits_for_an_admin(
    api, org, token, admin_headers
) -> None:
    kept = write(api, admin_headers, content=POSTGRES)
    grant(api, admin_headers, project_space_id(api, admin_headers), "alice", "context:space:search")
    alice = bearer(token(org, "alice"))
    require_review(api, admin_headers)

    proposed = api.post(f"{BASE}/{PROJECT}", headers=alice, json={"content": LATENCY})

    assert proposed.status_code == 202
    pending = proposed.json()
    assert pending == {
        "id": pending["id"],
        "project_id": PROJECT,
        "revision": 1,
        "state": "pending",
    }
    listed = api.get(f"{BASE}/{PROJECT}", headers=alice).json()["memories"]
    assert [m["id"] for m in listed] == [kept["id"]]
    accept = f"{BASE}/{PROJECT}/{pending['id']}/revisions/1/accept"
    assert error_of(api.post(accept, headers=alice)) == (403, "forbidden")
    accepted = api.post(accept, headers=admin_headers)
    assert accepted.status_code == 200
    assert (accepted.json()["content"], accepted.json()["id"]) == (LATENCY, pending["id"])
    listed = api.get(f"{BASE}/{PROJECT}", headers=alice).json()["memories"]
    assert [m["id"] for m in listed] == [pending["id"], kept["id"]]
    assert error_of(api.post(accept, headers=admin_headers)) == (409, "memory.revision.conflict")


def test_with_review_a_change_is_served_only_once_accepted(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES)
    require_review(api, admin_headers)
    path = f"{BASE}/{PROJECT}/{memory['id']}"

    first = api.patch(path, headers=admin_headers, json={"content": "Postgres 17."})
    second = api.patch(path, headers=admin_headers, json={"content": "Postgres 18."})

    assert [first.status_code, second.status_code] == [202, 202]
    assert [first.json()["revision"], second.json()["revision"]] == [2, 3]
    served = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers).json()["memories"]
    assert [m["content"] for m in served] == [POSTGRES]
    accepted = api.post(f"{path}/revisions/3/accept", headers=admin_headers)
    assert accepted.json()["content"] == "Postgres 18."
    revisions = api.get(f"{path}/revisions", headers=admin_headers).json()["revisions"]
    assert [(r["revision"], r["state"]) for r in revisions] == [
        (1, "superseded"),
        (2, "superseded"),
        (3, "accepted"),
    ]
    older = api.post(f"{path}/revisions/2/accept", headers=admin_headers)
    assert error_of(older) == (409, "memory.revision.conflict")
    for unknown in ("9", "0", "two"):
        response = api.post(f"{path}/revisions/{unknown}/accept", headers=admin_headers)
        assert error_of(response) == (404, "memory.revision.not_found")


def test_without_review_a_searcher_still_cannot_write_and_only_admins_set_review(
    api, org, token, admin_headers
) -> None:
    write(api, admin_headers, content=POSTGRES)
    grant(api, admin_headers, project_space_id(api, admin_headers), "alice", "context:space:search")
    alice = bearer(token(org, "alice"))

    refused = api.put(f"{BASE}/{PROJECT}/review", headers=alice, json={"required": True})

    assert error_of(refused) == (403, "forbidden")
    proposal = api.post(f"{BASE}/{PROJECT}", headers=alice, json={"content": "x"})
    assert error_of(proposal) == (403, "forbidden")
    for body in ({}, {"required": "yes"}, {"required": True, "other": 1}):
        response = api.put(f"{BASE}/{PROJECT}/review", headers=admin_headers, json=body)
        assert error_of(response) == (422, "validation_failed")
    unknown = api.put(f"{BASE}/nope/review", headers=admin_headers, json={"required": True})
    assert error_of(unknown) == (404, "memory.project.not_found")


def test_deleting_a_pending_memory_withdraws_the_proposal(api, admin_headers) -> None:
    write(api, admin_headers, content=POSTGRES)
    require_review(api, admin_headers)
    pending = api.post(f"{BASE}/{PROJECT}", headers=admin_headers, json={"content": "x"}).json()

    deleted = api.delete(f"{BASE}/{PROJECT}/{pending['id']}", headers=admin_headers)

    assert deleted.status_code == 204
    accept = api.post(f"{BASE}/{PROJECT}/{pending['id']}/revisions/1/accept", headers=admin_headers)
    assert error_of(accept) == (404, "memory.revision.not_found")
