"""The vector search on a side connection, beside the text search: the same candidates as one
connection running both, for both backends, also over several parts with the smallest part's
vector search beside the texts; and the retrieve use case with the pool's spare connection gives
the same answer as without."""

from __future__ import annotations

from dataclasses import replace

import psycopg
import pytest
from psycopg.rows import dict_row
from search_support import admin_of, find_candidates, publish_source

from context_ledger.db import connection, spare_connection
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.http.retrieve import RetrieveRequest
from context_ledger.local.embeddings_server import serve_embeddings
from context_ledger.retrieval.cache import SearchCache
from context_ledger.retrieval.service import Dependencies, retrieve
from context_ledger.search.candidates import search_candidates, with_terms
from context_ledger.search.query import SearchQuery
from context_ledger.settings import SearchBackend, load_settings
from context_ledger.sources.model import Document
from context_ledger.spaces.service import create_organisation

TOPICS = ["refund", "invoice", "ledger", "payment", "customer", "receipt", "audit", "tax"]
DOCS = [
    Document(
        f"notes/{i:02d}.md",
        f"Note {i} on the {TOPICS[i % 8]} process: every {TOPICS[(i * 3) % 8]} is checked"
        f" against the {TOPICS[(i * 5 + 1) % 8]} records.",
    )
    for i in range(40)
]
QUERIES = ["refund receipt", "ledger audit records", "tax payment process"]


@pytest.fixture
def indexed(db, database_url):
    with serve_embeddings(dims=64) as server:
        embedder = EmbeddingsClient(server.url, "hashing-64", dimensions=64)
        with connection() as conn:
            org = create_organisation(conn, name="Acme")
            source = publish_source(conn, org, DOCS, embedder=embedder)
        yield admin_of(org), source, embedder


@pytest.mark.parametrize("backend", [SearchBackend.EXACT, SearchBackend.PGVECTOR])
def test_a_side_connection_finds_exactly_what_one_connection_finds(
    indexed, database_url, backend
) -> None:
    admin, source_id, embedder = indexed
    for query in QUERIES:
        vector = embedder.embed([query])[0]
        found = {}
        for mode in ("one connection", "side connection"):
            with (
                psycopg.connect(database_url, row_factory=dict_row) as conn,
                psycopg.connect(database_url, row_factory=dict_row) as side,
            ):
                found[mode] = find_candidates(
                    conn,
                    org_id=admin.org_id,
                    source_ids=[source_id],
                    query=query,
                    query_vector=vector,
                    backend=backend,
                    side_connection=side if mode == "side connection" else None,
                )
                assert side.info.transaction_status is psycopg.pq.TransactionStatus.IDLE

        assert found["side connection"] == found["one connection"], query
        assert any(c.found_by_vector for c in found["one connection"])


def test_the_use_case_with_the_pools_spare_connection_answers_the_same(indexed) -> None:
    admin, _, embedder = indexed
    settings = load_settings(KEYSTONE_CONTEXT_SEARCH_BACKEND="pgvector")
    request = RetrieveRequest.model_validate(
        {"query": "refund receipt", "maxPerLevel": 20}
    ).to_query()
    answers = []
    for side in (None, spare_connection):
        extra = {"side_connection": side} if side else {}
        deps = Dependencies(
            settings=settings,
            cache=SearchCache(),
            embedder=embedder,
            **extra,
        )
        with connection() as conn:
            answer = retrieve(conn, admin, request, client_header=None, deps=deps)
        answers.append([(c.row["id"], round(c.score, 9)) for c in answer.chunks])

    assert answers[0] == answers[1]
    assert len(answers[0]) == 20


class _Recording(psycopg.Cursor):
    """Remembers the search statements sent through it: (text search?, sources bound)."""

    sent: list[tuple[bool, frozenset]]

    def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
        if params is not None and "source_ids" in params:
            text = query if isinstance(query, str) else query.as_string(self.connection)
            self.connection.sent.append(("%(match)s" in text, frozenset(params["source_ids"])))
        return super().execute(query, params, **kwargs)


def _recording(url: str) -> psycopg.Connection:
    conn = psycopg.connect(url, cursor_factory=_Recording)
    conn.sent = []  # type: ignore[attr-defined]
    return conn


@pytest.mark.parametrize("backend", [SearchBackend.EXACT, SearchBackend.PGVECTOR])
def test_over_several_parts_the_smallest_parts_vector_search_runs_beside_the_texts(
    db, database_url, backend
) -> None:
    """The side connection takes the larger parts' vector statements, the request's the text
    statements and the smallest part's vector statement; the candidates are one connection's."""
    with serve_embeddings(dims=64) as server:
        embedder = EmbeddingsClient(server.url, "hashing-64", dimensions=64)
        with connection() as conn:
            org = create_organisation(conn, name="Acme")
        sizes = {"large": 30, "small": 6, "middle": 15}
        sources = {}
        for name, size in sizes.items():
            with connection() as conn:  # one build a transaction
                sources[name] = publish_source(conn, org, DOCS[:size], embedder=embedder, name=name)
        vector = embedder.embed(["refund receipt"])[0]
        pgvector = backend is SearchBackend.PGVECTOR
        found, sent = {}, {}
        for mode in ("one connection", "side connection"):
            with _recording(database_url) as conn, _recording(database_url) as side:
                searches = [
                    replace(
                        with_terms(
                            conn,
                            SearchQuery(org.id, [source], "refund receipt", vector, 10),
                            versions=pgvector,
                        ),
                        chunks=sizes[name],
                    )
                    for name, source in sources.items()
                ]
                conn.sent.clear()
                found[mode] = search_candidates(
                    conn,
                    searches,
                    backend=backend,
                    side_connection=side if mode == "side connection" else None,
                )
                sent[mode] = (set(conn.sent), set(side.sent))

    assert found["side connection"] == found["one connection"]
    assert any(c.found_by_vector for c in found["one connection"])
    parts = {name: frozenset([source]) for name, source in sources.items()}
    request_side, side_side = sent["side connection"]
    assert request_side == {
        (True, parts["large"]),
        (True, parts["middle"]),
        (True, parts["small"]),
        (False, parts["small"]),
    }
    assert side_side == {(False, parts["large"]), (False, parts["middle"])}
    assert sent["one connection"][1] == set()
