"""Memory use cases against the real database with injected embedders: the spec's example with
its own similarities, incompatible vectors, the candidate cap, and the memory's chunk."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from api_support import current_chunks

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.db import connection
from context_ledger.memory import service
from context_ledger.memory.embedding import MemoryEmbedder
from context_ledger.memory.projects import find_project
from context_ledger.settings import load_settings
from context_ledger.sources import store as sources_store
from context_ledger.spaces.permissions import Permission
from context_ledger.spaces.service import create_organisation
from context_ledger.text.tokens import count_tokens

POSTGRES = "We use Postgres, not MongoDB, because the ranking query needs joins."
LATENCY = "The retrieval endpoint must answer in under 200 ms at p95."
QUERY = "which database did we pick"


class TableEmbedder:
    """Vectors looked up by text: the similarities a test needs, exactly."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str], *, within: float | None = None) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.table[text] for text in texts]


SPEC_VECTORS = {
    QUERY: [1.0, 0.0, 0.0],
    POSTGRES: [0.1348, math.sqrt(1 - 0.1348**2), 0.0],
    LATENCY: [0.0, 1.0, 0.0],
}


@pytest.fixture
def admin(db) -> Principal:
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
    return Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


def deps(
    embedder, *, name: str = "TableEmbedder", dims: int = 3, **settings
) -> service.Dependencies:
    return service.Dependencies(
        settings=load_settings(**settings),
        embedder=MemoryEmbedder(embedder=embedder, name=name, dimensions=dims, client=None),
    )


FIELDS = {"type": "fact", "confidence": 1.0, "importance": 0.5, "metadata": {}}


def write(admin: Principal, content: str, d: service.Dependencies, **fields) -> str:
    values = FIELDS | fields
    with connection() as conn:
        return service.create_memory(
            conn,
            admin,
            "billing-service",
            item=service.NewMemory(fields={**values, "content": content}),
            deps=d,
        ).memory_id


def relevant(admin: Principal, query: str, d: service.Dependencies, limit: int = 5):
    with connection() as conn:
        return service.relevant_memories(
            conn,
            admin,
            "billing-service",
            query=query,
            limit=limit,
            min_score=None,
            token_budget=None,
            deps=d,
        )


def test_the_spec_example_scores_with_its_similarities(admin) -> None:
    d = deps(TableEmbedder(SPEC_VECTORS))
    first = write(admin, POSTGRES, d, type="decision", importance=0.9)
    second = write(admin, LATENCY, d, type="constraint", importance=0.8)

    answer = relevant(admin, QUERY, d, limit=2)

    assert [m.to_wire() | {"id": m.memory.id} for m in answer.memories] == [
        {
            **answer.memories[0].memory.to_wire(),
            "id": first,
            "score": 0.4789,
            "similarity": 0.1348,
            "justification": "semantic similarity 0.13 (TableEmbedder, 3d)",
        },
        {
            **answer.memories[1].memory.to_wire(),
            "id": second,
            "score": 0.4,
            "similarity": 0.0,
            "justification": "semantic similarity 0.00 (TableEmbedder, 3d)",
        },
    ]


def test_an_empty_query_is_never_embedded(admin) -> None:
    embedder = TableEmbedder(SPEC_VECTORS)
    d = deps(embedder)
    write(admin, POSTGRES, d)
    embedder.calls.clear()

    answer = relevant(admin, "   ", d)

    assert embedder.calls == []
    assert [m.similarity for m in answer.memories] == [1.0]


def test_vectors_of_another_provider_or_dimension_have_similarity_zero(admin) -> None:
    stored_with = deps(TableEmbedder(SPEC_VECTORS))
    write(admin, POSTGRES, stored_with, importance=0.9)
    wider = TableEmbedder({QUERY: [1.0, 0.0, 0.0, 0.0]})
    other = TableEmbedder({QUERY: [1.0, 0.0, 0.0]})

    for d, label in (
        (deps(wider, dims=4), "TableEmbedder, 4d"),
        (deps(other, name="OtherProvider"), "OtherProvider, 3d"),
    ):
        (served,) = relevant(admin, QUERY, d).memories
        assert served.similarity == 0.0
        assert served.justification == f"incompatible vectors: similarity 0.00 ({label})"
        assert served.score == pytest.approx(0.20 + 0.25 * 0.9, abs=1e-6)


def test_candidates_are_capped_newest_first_with_a_logged_warning(
    admin, caplog: pytest.LogCaptureFixture
) -> None:
    d = deps(TableEmbedder(SPEC_VECTORS), VENKAI_RETRIEVAL_MAX_CANDIDATES="2")
    oldest = write(admin, POSTGRES, d, importance=1.0)
    newer = [write(admin, LATENCY, d, importance=0.0) for _ in range(2)]

    answer = relevant(admin, "", d, limit=10)

    assert sorted(m.memory.id for m in answer.memories) == sorted(newer)
    assert oldest not in {m.memory.id for m in answer.memories}
    warnings = [r for r in caplog.records if "truncated" in r.getMessage()]
    assert [(w.levelname, w.cap) for w in warnings] == [("WARNING", 2)]


def test_ranking_is_deterministic_on_ties(admin) -> None:
    d = deps(TableEmbedder(SPEC_VECTORS))
    ids = [write(admin, LATENCY, d) for _ in range(4)]
    fixed = service.Dependencies(
        settings=d.settings, embedder=d.embedder, now=lambda: datetime.now(UTC) + timedelta(days=1)
    )
    with connection() as conn:
        conn.execute(
            "UPDATE memory_entries SET created_at = '2026-01-01', updated_at = '2026-01-01'"
        )

    answers = [[m.memory.id for m in relevant(admin, QUERY, fixed).memories] for _ in range(3)]

    assert answers[0] == answers[1] == answers[2] == sorted(ids)


def test_the_accepted_revision_is_the_memorys_only_chunk_until_deleted(admin) -> None:
    d = deps(TableEmbedder(SPEC_VECTORS | {"Postgres 18.": [0.0, 0.0, 1.0]}))
    memory_id = write(admin, POSTGRES, d)
    with connection() as conn:
        service.update_memory(
            conn, admin, "billing-service", memory_id, changes={"content": "Postgres 18."}, deps=d
        )
        project = find_project(conn, admin, "billing-service", Permission.SEARCH)
        chunks = current_chunks(conn, org_id=admin.org_id, source_ids=[project.source_id])
        assert [(c["path"], c["content"]) for c in chunks] == [
            (f"memories/{memory_id}", "Postgres 18.")
        ]
        assert counts(conn, project.source_id) == (1, 1, count_tokens("Postgres 18."))
        service.delete_memory(conn, admin, "billing-service", memory_id)
        assert current_chunks(conn, org_id=admin.org_id, source_ids=[project.source_id]) == []
        assert counts(conn, project.source_id) == (0, 0, 0)


def counts(conn, source_id) -> tuple[int, int, int]:
    """The served version's document, chunk and token counters."""
    (version,) = sources_store.list_versions(conn, source_id=source_id)
    assert version["state"] == "published"
    return version["document_count"], version["chunk_count"], version["token_count"]


def test_a_warm_vector_cache_serves_a_changed_memorys_new_vector(admin) -> None:
    # GIVEN three memories read once (a cold cache reads all vectors in one scan)
    d = deps(TableEmbedder(SPEC_VECTORS | {"Postgres 18.": [1.0, 0.0, 0.0]}))
    memory_id = write(admin, POSTGRES, d)
    others = [write(admin, LATENCY, d, importance=0.0) for _ in range(2)]
    before = {m.memory.id: m.similarity for m in relevant(admin, QUERY, d).memories}
    # WHEN one changes (the warm cache then fetches that one vector by id)
    with connection() as conn:
        service.update_memory(
            conn, admin, "billing-service", memory_id, changes={"content": "Postgres 18."}, deps=d
        )
    after = {m.memory.id: m.similarity for m in relevant(admin, QUERY, d).memories}

    assert before == {memory_id: pytest.approx(0.1348), **dict.fromkeys(others, 0.0)}
    assert after == {memory_id: pytest.approx(1.0), **dict.fromkeys(others, 0.0)}


def test_a_batch_embeds_its_memories_in_one_call_and_each_becomes_a_chunk(admin) -> None:
    embedder = TableEmbedder(SPEC_VECTORS)
    d = deps(embedder)
    items = [
        service.NewMemory(fields={**FIELDS, "content": content}) for content in (POSTGRES, LATENCY)
    ]

    with connection() as conn:
        written = service.create_memories(conn, admin, "billing-service", items=items, deps=d)
        project = find_project(conn, admin, "billing-service", Permission.SEARCH)
        chunks = current_chunks(conn, org_id=admin.org_id, source_ids=[project.source_id])
        tokens = count_tokens(POSTGRES) + count_tokens(LATENCY)
        assert counts(conn, project.source_id) == (2, 2, tokens)

    assert embedder.calls == [[POSTGRES, LATENCY]]
    assert sorted(c["path"] for c in chunks) == sorted(f"memories/{i}" for i in written.ids)
    assert [m.similarity for m in relevant(admin, QUERY, d).memories] == pytest.approx(
        [0.1348, 0.0]
    )


def test_a_duplicate_is_not_embedded_again(admin) -> None:
    embedder = TableEmbedder(SPEC_VECTORS)
    d = deps(embedder)
    first = write(admin, POSTGRES, d)

    with connection() as conn:
        again = service.create_memory(
            conn,
            admin,
            "billing-service",
            item=service.NewMemory(fields={**FIELDS, "content": POSTGRES.upper()}, dedupe=True),
            deps=d,
        )

    assert (again.memory_id, again.duplicate, again.revision) == (first, True, None)
    assert embedder.calls == [[POSTGRES]]
