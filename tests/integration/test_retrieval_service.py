"""The retrieve use case with injected parts: hybrid search with an embeddings endpoint, the
backend choice, and what is published."""

from __future__ import annotations

import pytest

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.cooldown import Cooldown
from context_ledger.db import connection
from context_ledger.dlp.classification import Classification
from context_ledger.dlp.policy import replace_policy
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.http.retrieve import RetrieveRequest
from context_ledger.local.embeddings_server import serve_embeddings
from context_ledger.retrieval.cache import SearchCache
from context_ledger.retrieval.query_vector import DEGRADED_WARNING, SearchMode
from context_ledger.retrieval.service import Dependencies, retrieve
from context_ledger.settings import load_settings
from context_ledger.sources import service as sources
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.service import create_organisation


@pytest.fixture
def stand_in():
    with serve_embeddings(dims=64) as server:
        yield server


@pytest.fixture
def admin(db) -> Principal:
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
    return Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


def ingest(admin: Principal, documents: list[Document], embedder, classification) -> None:
    with connection() as conn:
        root = conn.execute(
            "SELECT id FROM spaces WHERE org_id = %s AND level = 'organisation'", (admin.org_id,)
        ).fetchone()
        source = sources.create_source(
            conn,
            admin,
            space_id=root["id"],
            kind=SourceKind.DOCS,
            name="docs",
            classification=classification,
        )
        sources.index_snapshot(conn, admin, source["id"], documents, embedder=embedder)


def run(
    admin: Principal,
    query: str,
    embedder,
    backend: str = "exact",
    *,
    cooldown: Cooldown | None = None,
    **settings: str,
):
    deps = Dependencies(
        settings=load_settings(KEYSTONE_CONTEXT_SEARCH_BACKEND=backend, **settings),
        cache=SearchCache(),
        embedder=embedder,
        cooldown=cooldown or Cooldown(),
    )
    request = RetrieveRequest.model_validate({"query": query, "excludeRelated": True}).to_query()
    with connection() as conn:
        answer = retrieve(conn, admin, request, client_header=None, deps=deps)
    return answer, [answer.event]


DOCS = [
    Document("refunds.md", "Refunds are authorised by a team lead within thirty days."),
    Document("receipts.md", "Receipts prove the purchase; keep them for refunds."),
    Document("holidays.md", "The office closes for holidays in August."),
]


@pytest.mark.parametrize("backend", ["exact", "pgvector"])
def test_with_embeddings_a_chunk_found_by_both_searches_ranks_first(admin, stand_in, backend):
    embedder = EmbeddingsClient(stand_in.url, "hashing-64", dimensions=64)
    ingest(admin, DOCS, embedder, Classification.INTERNAL)
    stand_in.reset()

    answer, published = run(admin, "who authorises refunds", embedder, backend)

    assert answer.chunks[0].row["path"] == "refunds.md"
    assert answer.chunks[0].score > 0.3 * 1.0 * 0.85, "the vector term adds to the text term"
    assert [r.body["input"] for r in stand_in.requests] == [["who authorises refunds"]]
    assert len(published) == 1
    assert published[0]["record"]["attributionId"] == str(answer.attribution_id)


def test_without_embeddings_scores_are_the_text_term_only(admin) -> None:
    ingest(admin, DOCS, None, Classification.INTERNAL)

    answer, _ = run(admin, "refunds", None)

    top = answer.chunks[0]
    assert top.score == pytest.approx(0.3 * 1.0 * 0.85), "top text hit: text 1.0, organisation 0.85"


def test_a_protected_source_is_searched_by_full_text_only(admin, stand_in) -> None:
    embedder = EmbeddingsClient(stand_in.url, "hashing-64", dimensions=64)
    ingest(admin, DOCS, embedder, Classification.CONFIDENTIAL)

    answer, _ = run(admin, "refunds team lead", embedder)

    assert answer.chunks, "full-text still finds the confidential source's chunks"
    assert all(r.body["input"] == ["refunds team lead"] for r in stand_in.requests)


def test_vectors_left_behind_by_a_policy_change_are_never_searched(admin, stand_in) -> None:
    """Embedded while ``internal`` meant ``redact``; the organisation then maps it to ``drop``:
    its chunks are searched through full-text only, the stored vectors neither find a chunk
    nor add to a text hit's score."""
    embedder = EmbeddingsClient(stand_in.url, "hashing-64", dimensions=64)
    ingest(admin, DOCS, embedder, Classification.INTERNAL)
    with connection() as conn:
        replace_policy(conn, admin, actions={"internal": "drop"}, patterns=[])

    answer, _ = run(admin, "who authorises refunds", embedder)

    assert {c.row["path"] for c in answer.chunks} == {"refunds.md", "receipts.md"}, "text only"
    assert answer.chunks[0].score == pytest.approx(0.3 * 1.0 * 0.85), "no vector term"
    assert all(c.score <= 0.3 * 0.85 + 1e-9 for c in answer.chunks)


def test_an_endpoint_that_answers_in_time_makes_the_search_hybrid(admin, stand_in) -> None:
    embedder = EmbeddingsClient(stand_in.url, "hashing-64", dimensions=64)
    ingest(admin, DOCS, embedder, Classification.INTERNAL)

    answer, published = run(admin, "refunds", embedder)

    assert (answer.search_mode, answer.warnings) == (SearchMode.HYBRID, ())
    assert published[0]["record"]["searchMode"] == "hybrid"


def test_a_slow_endpoint_degrades_to_full_text_within_the_query_timeout(admin, stand_in) -> None:
    embedder = EmbeddingsClient(stand_in.url, "hashing-64", dimensions=64)
    ingest(admin, DOCS, embedder, Classification.INTERNAL)
    stand_in.reset()
    stand_in.delay = 5.0  # the client's own timeout is 30 s: only the query timeout ends this

    answer, published = run(
        admin, "refunds", embedder, KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS="0.2"
    )

    assert answer.search_mode is SearchMode.FULL_TEXT
    assert answer.warnings == (DEGRADED_WARNING,)
    assert {c.row["path"] for c in answer.chunks} == {"refunds.md", "receipts.md"}, "text matches"
    assert answer.chunks[0].score == pytest.approx(0.3 * 1.0 * 0.85), "the text term alone"
    assert published[0]["record"]["searchMode"] == "full_text", "the evidence says so too"
    assert len(stand_in.requests) == 1, "no retry once the time is spent"


def test_after_a_failure_the_endpoint_is_skipped_for_the_cooldown_then_tried_again(
    admin, stand_in
) -> None:
    embedder = EmbeddingsClient(stand_in.url, "hashing-64", dimensions=64, max_attempts=1)
    ingest(admin, DOCS, embedder, Classification.INTERNAL)
    stand_in.reset()
    now = [0.0]
    cooldown = Cooldown(clock=lambda: now[0])
    stand_in.fail_next(503)

    first, _ = run(admin, "refunds", embedder, cooldown=cooldown)
    now[0] = 14.0
    during, _ = run(admin, "refunds", embedder, cooldown=cooldown)
    now[0] = 15.5
    after, _ = run(admin, "refunds", embedder, cooldown=cooldown)

    assert [a.search_mode for a in (first, during, after)] == [
        SearchMode.FULL_TEXT,
        SearchMode.FULL_TEXT,
        SearchMode.HYBRID,
    ]
    assert during.warnings == (DEGRADED_WARNING,)
    assert len(stand_in.requests) == 2, "the request inside the 15 s cooldown sent nothing"


def test_a_degraded_search_is_not_cached(admin, stand_in) -> None:
    embedder = EmbeddingsClient(stand_in.url, "hashing-64", dimensions=64, max_attempts=1)
    ingest(admin, DOCS, embedder, Classification.INTERNAL)
    stand_in.reset()
    stand_in.fail_next(503)
    deps = Dependencies(
        settings=load_settings(KEYSTONE_CONTEXT_EMBEDDINGS_COOLDOWN_SECONDS="0"),
        cache=SearchCache(),
        embedder=embedder,
    )
    request = RetrieveRequest.model_validate(
        {"query": "refunds", "excludeRelated": True}
    ).to_query()

    with connection() as conn:
        modes = [
            retrieve(conn, admin, request, client_header=None, deps=deps).search_mode
            for _ in range(3)
        ]

    assert modes == [SearchMode.FULL_TEXT, SearchMode.HYBRID, SearchMode.HYBRID]
    assert len(stand_in.requests) == 2, "the third answer came from the cached hybrid search"


def test_without_an_endpoint_the_search_is_full_text_without_a_warning(admin) -> None:
    ingest(admin, DOCS, None, Classification.INTERNAL)

    answer, published = run(admin, "refunds", None)

    assert (answer.search_mode, answer.warnings) == (SearchMode.FULL_TEXT, ())
    assert published[0]["record"]["searchMode"] == "full_text"


def test_a_text_in_two_sources_is_delivered_and_recorded_once(admin) -> None:
    ingest(admin, DOCS, None, Classification.INTERNAL)
    ingest(admin, DOCS[:1], None, Classification.INTERNAL)  # refunds.md again, another source

    answer, published = run(admin, "authorised by a team lead", None)

    contents = [c.row["content"] for c in answer.chunks]
    assert contents.count(DOCS[0].content) == 1
    recorded = published[0]["record"]
    assert [c["chunkId"] for c in recorded["chunks"]] == [str(c.row["id"]) for c in answer.chunks]
    assert recorded["tokensUsed"] == answer.tokens_used == sum(c.tokens for c in answer.chunks)
