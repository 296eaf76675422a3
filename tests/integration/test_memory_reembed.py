"""Re-embedding (memory/reembed.py) against the real database and a real embeddings endpoint: the
stand-in server serving all-MiniLM-L6-v2 over the OpenAI wire protocol, after memories were
written with the in-process hashing provider (the default without an endpoint)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.db import connection
from context_ledger.dlp.policy import replace_policy
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider
from context_ledger.embeddings.serving import MiniLMService
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.memory import reembed, service, store
from context_ledger.memory.embedding import MemoryEmbedder, memory_embedder
from context_ledger.memory.projects import find_project
from context_ledger.settings import load_settings
from context_ledger.sources import store as sources_store
from context_ledger.spaces.permissions import Permission
from context_ledger.spaces.service import create_organisation

PROJECT = "billing-service"
CONTENTS = [
    "We use Postgres, not MongoDB, because the ranking query needs joins.",
    "The retrieval endpoint must answer in under 200 ms at p95.",
    "Invoices are paid in EUR; refunds need a ticket.",
]
QUERY = "which database did we pick"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
FIELDS = {"type": "fact", "confidence": 1.0, "importance": 0.5, "metadata": {}}


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddingProvider:
    return MiniLMEmbeddingProvider()


@pytest.fixture(scope="module")
def stand_in(minilm) -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, service=MiniLMService(minilm)) as running:
        yield running


@pytest.fixture
def endpoint(stand_in) -> StandInEmbeddingsServer:
    stand_in.reset()
    return stand_in


@pytest.fixture
def admin(db) -> Principal:
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
    return Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


def hashing() -> service.Dependencies:
    """The default without an endpoint: the in-process hashing provider, 128 dimensions."""
    settings = load_settings()
    return service.Dependencies(settings=settings, embedder=memory_embedder(settings))


def through(stand_in: StandInEmbeddingsServer, *, dimensions: int | None = 384, **settings):
    """MiniLM through the stand-in, as a deployment configures an endpoint."""
    client = EmbeddingsClient(stand_in.url, "all-MiniLM-L6-v2", dimensions=dimensions)
    return service.Dependencies(
        settings=load_settings(**settings),
        embedder=MemoryEmbedder(
            embedder=client, name=client.model, dimensions=dimensions, client=client
        ),
    )


def write(admin: Principal, contents: list[str], d: service.Dependencies) -> list[str]:
    items = [service.NewMemory(fields=FIELDS | {"content": c}) for c in contents]
    with connection() as conn:
        return service.create_memories(conn, admin, PROJECT, items=items, deps=d).ids


def relevant(admin: Principal, d: service.Dependencies, query: str = QUERY):
    with connection() as conn:
        return service.relevant_memories(
            conn,
            admin,
            PROJECT,
            query=query,
            limit=10,
            min_score=None,
            token_budget=None,
            deps=d,
        )


def run(d: service.Dependencies, **kwargs) -> reembed.Progress:
    return reembed.reembed(embedder=d.embedder, settings=d.settings, **kwargs)


def sent(stand_in: StandInEmbeddingsServer) -> list[str]:
    return [text for request in stand_in.requests for text in request.body["input"]]


def test_after_a_model_change_reembedding_gives_the_new_models_similarities(
    admin, endpoint, minilm
) -> None:
    ids = write(admin, CONTENTS, hashing())
    d = through(endpoint)
    before = relevant(admin, d)
    assert {m.similarity for m in before.memories} == {0.0}

    done = run(d)

    assert (done.reembedded, done.remaining, done.withheld) == (3, 0, 0)
    query, *contents = minilm.embed([QUERY, *CONTENTS])
    # cosine, clipped to the spec's 0-1 range
    expected = {
        i: max(0.0, float(np.dot(query, vector))) for i, vector in zip(ids, contents, strict=True)
    }
    after = relevant(admin, d)
    assert {m.memory.id: m.similarity for m in after.memories} == pytest.approx(expected, abs=1e-5)
    assert after.memories[0].memory.content == CONTENTS[0]  # the database question ranks first
    assert {m.justification.split(" (")[1] for m in after.memories} == {"all-MiniLM-L6-v2, 384d)"}
    assert after.warnings == ()


def test_relevant_warns_how_many_memories_are_not_yet_reembedded(admin, endpoint) -> None:
    write(admin, CONTENTS, hashing())
    d = through(endpoint)
    run(d, max_memories=1)

    (warning,) = relevant(admin, d).warnings

    assert warning.startswith(
        "2 memories of this project are not yet re-embedded with all-MiniLM-L6-v2, 384d: their "
        "similarity is 0.00"
    )
    assert "context-ledger memories reembed" in warning
    # an empty query embeds nothing, and with a configured dimension it still knows
    (empty,) = relevant(admin, d, query="").warnings
    assert empty.startswith("2 memories")
    run(d, max_memories=1)
    assert relevant(admin, d).warnings[0].startswith("1 memory of this project is not yet")


def test_a_run_stopped_midway_resumes_where_it_stopped(admin, endpoint) -> None:
    write(
        admin, [*CONTENTS, "Deploys happen on Tuesdays.", "Staging mirrors production."], hashing()
    )
    d = through(endpoint, KEYSTONE_CONTEXT_EMBEDDINGS_BATCH_SIZE="2")

    # a clock that passes the deadline while the first batch is being embedded
    stopped = run(d, deadline=5.0, clock=lambda: 10.0 * len(endpoint.requests))

    assert (stopped.reembedded, stopped.remaining) == (2, 3)
    resumed = run(d)
    assert (resumed.reembedded, resumed.remaining) == (3, 0)
    assert len(set(sent(endpoint))) == 5  # each memory sent once: nothing done twice


def test_reembedding_again_does_nothing_when_all_are_current(admin, endpoint) -> None:
    write(admin, CONTENTS, hashing())
    d = through(endpoint)
    run(d)
    endpoint.reset()

    again = run(d)

    assert (again.reembedded, again.remaining, again.withheld) == (0, 0, 0)
    assert endpoint.requests == []


def test_memories_written_with_the_configured_model_are_current(admin, endpoint) -> None:
    d = through(endpoint)
    write(admin, CONTENTS, d)
    endpoint.reset()

    assert run(d).reembedded == 0
    assert endpoint.requests == []
    assert relevant(admin, d).warnings == ()


def test_reembedding_sends_content_redacted_by_the_dlp_gate(admin, endpoint) -> None:
    write(admin, [f"Deploys sign with AWS_ACCESS_KEY_ID={AWS_KEY}."], hashing())

    run(through(endpoint))

    assert sent(endpoint) == ["Deploys sign with AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key]."]


def test_an_organisation_whose_policy_keeps_memories_from_the_endpoint_sends_nothing(
    admin, endpoint
) -> None:
    write(admin, CONTENTS, hashing())
    with connection() as conn:
        replace_policy(conn, admin, actions={"internal": "drop"}, patterns=[])
    d = through(endpoint)

    done = run(d)

    assert (done.reembedded, done.remaining, done.withheld) == (0, 0, 3)
    assert endpoint.requests == []
    # nothing is waiting to be re-embedded: /relevant does not say so
    assert relevant(admin, d).warnings == ()


def test_a_batch_another_worker_holds_is_skipped_not_waited_for(admin, endpoint) -> None:
    write(admin, CONTENTS, hashing())
    d = through(endpoint, KEYSTONE_CONTEXT_EMBEDDINGS_BATCH_SIZE="1")
    provider = "all-MiniLM-L6-v2/384"
    with connection() as holder:
        project = find_project(holder, admin, PROJECT, Permission.SEARCH)
        [held] = store.lock_stale_batch(
            holder, space_id=project.space_id, provider=provider, limit=1
        )

        done = run(d)

        assert done.reembedded == 2
        assert held["content"] not in sent(endpoint)
    assert run(d).reembedded == 1  # released: the next run takes it


def test_reembedding_keeps_content_revisions_and_updated_at(admin, endpoint) -> None:
    [memory_id] = write(admin, CONTENTS[:1], hashing())
    with connection() as conn:
        before = service.get_memory(conn, admin, PROJECT, memory_id)

    run(through(endpoint))

    with connection() as conn:
        assert service.get_memory(conn, admin, PROJECT, memory_id) == before
        assert [r.revision for r in service.memory_revisions(conn, admin, PROJECT, memory_id)] == [
            1
        ]


def test_the_memorys_chunk_gets_the_endpoints_vector_and_its_source_counts_it(
    admin, endpoint, minilm
) -> None:
    write(admin, CONTENTS, hashing())  # no endpoint: the chunks have no vector

    run(through(endpoint))

    with connection() as conn:
        project = find_project(conn, admin, PROJECT, Permission.SEARCH)
        rows = conn.execute(
            "SELECT content, embedding, embedding_model FROM chunks WHERE source_id = %s",
            [project.source_id],
        ).fetchall()
        (version,) = sources_store.list_versions(conn, source_id=project.source_id)
    assert {row["embedding_model"] for row in rows} == {"all-MiniLM-L6-v2"}
    for row in rows:
        assert row["embedding"] == pytest.approx(minilm.embed([row["content"]])[0], abs=1e-5)
    assert version["embedded_count"] == 3


def test_without_a_configured_dimension_the_endpoint_is_asked_with_a_constant_probe(
    admin, endpoint
) -> None:
    write(admin, CONTENTS, hashing())
    d = through(endpoint, dimensions=None)

    assert run(d).reembedded == 3
    endpoint.reset()
    assert run(d).reembedded == 0
    assert sent(endpoint) == [reembed.DIMENSION_PROBE]  # no memory's content


def test_a_run_can_be_limited_to_one_project(admin, endpoint) -> None:
    write(admin, CONTENTS, hashing())
    items = [service.NewMemory(fields=FIELDS | {"content": "Other project."})]
    with connection() as conn:
        service.create_memories(conn, admin, "other", items=items, deps=hashing())
        space_id = find_project(conn, admin, "other", Permission.SEARCH).space_id

    done = run(through(endpoint), space_id=space_id)

    assert (done.reembedded, done.remaining) == (1, 0)
    assert sent(endpoint) == ["Other project."]
