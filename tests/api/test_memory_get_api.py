"""``GET /api/context/{project_id}/{memory_id}`` (issue 28, item 2): one memory, served as the
list serves it, to whoever may read the list, and a 404 for everyone and everything else."""

from __future__ import annotations

from api_support import bearer, error_of
from memory_support import (
    BASE,
    LATENCY,
    POSTGRES,
    PROJECT,
    STORED_FIELDS,
    grant,
    project_space_id,
    require_review,
    write,
)

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN


def test_one_memory_is_the_lists_entry_without_an_embedding(api, admin_headers) -> None:
    memory = write(
        api,
        admin_headers,
        content=POSTGRES,
        type="decision",
        agent_key="planner",
        importance=0.9,
        metadata={"ticket": "ARCH-14"},
    )
    write(api, admin_headers, content=LATENCY)

    response = api.get(f"{BASE}/{PROJECT}/{memory['id']}", headers=admin_headers)

    assert response.status_code == 200
    assert list(response.json()) == STORED_FIELDS
    listed = api.get(f"{BASE}/{PROJECT}", headers=admin_headers).json()["memories"]
    assert response.json() == memory == next(m for m in listed if m["id"] == memory["id"])


def test_reading_one_changes_nothing(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES)

    for _ in range(3):
        again = api.get(f"{BASE}/{PROJECT}/{memory['id']}", headers=admin_headers).json()

    assert (again["access_count"], again["last_accessed_at"], again["updated_at"]) == (
        0,
        None,
        memory["updated_at"],
    )


def test_a_searcher_reads_any_agents_memory_a_stranger_gets_404(
    api, org, token, admin_headers
) -> None:
    memory = write(api, admin_headers, content=POSTGRES, agent_key="planner")
    grant(api, admin_headers, project_space_id(api, admin_headers), "alice", "context:space:search")
    path = f"{BASE}/{PROJECT}/{memory['id']}"

    read = api.get(path, headers=bearer(token(org, "alice")))
    refused = api.get(path, headers=bearer(token(org, "mallory")))

    assert read.json() == memory  # the agent key is a label, as in the list: no boundary
    assert error_of(refused) == (404, "memory.project.not_found")
    assert api.get(path).status_code == 401  # no credential: API Gateway's own answer


def test_another_projects_memory_is_404(api, admin_headers) -> None:
    memory = write(api, admin_headers, content=POSTGRES)
    write(api, admin_headers, project="other-project", content=LATENCY)

    response = api.get(f"{BASE}/other-project/{memory['id']}", headers=admin_headers)

    assert error_of(response) == (404, "memory.not_found")


def test_another_organisations_memory_is_404_even_under_the_same_key(
    api, org, other_org, token, admin_headers
) -> None:
    memory = write(api, admin_headers, content=POSTGRES)
    globex = bearer(token(other_org, "root", SCOPE_CONTEXT_ADMIN))
    path = f"{BASE}/{PROJECT}/{memory['id']}"

    unknown_project = api.get(path, headers=globex)
    write(api, globex, content=LATENCY)  # Globex's own billing-service
    unknown_memory = api.get(path, headers=globex)

    assert error_of(unknown_project) == (404, "memory.project.not_found")
    assert error_of(unknown_memory) == (404, "memory.not_found")


def test_pending_deleted_and_unknown_memories_are_404(api, admin_headers) -> None:
    gone = write(api, admin_headers, content=POSTGRES)
    assert api.delete(f"{BASE}/{PROJECT}/{gone['id']}", headers=admin_headers).status_code == 204
    require_review(api, admin_headers)
    pending = api.post(f"{BASE}/{PROJECT}", headers=admin_headers, json={"content": LATENCY})
    assert pending.status_code == 202

    for memory_id in (gone["id"], pending.json()["id"], "ctx_000000000000", "not-an-id"):
        response = api.get(f"{BASE}/{PROJECT}/{memory_id}", headers=admin_headers)
        assert error_of(response) == (404, "memory.not_found"), memory_id
    relevant = api.get(f"{BASE}/{PROJECT}/relevant", headers=admin_headers)
    assert relevant.status_code == 200, "relevant is still /relevant, not a memory id"
