"""The search step on a database without pgvector: exact search through the SQL function, and a
pgvector backend that fails closed.

Extensions belong to a database, and the session database has pgvector. So these tests migrate a
database of their own as a role that is no superuser: CREATE EXTENSION vector is refused
(pgvector is not a trusted extension) and migration 0002 carries on without the vector column,
as on a managed PostgreSQL whose application role cannot create it.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from search_support import admin_of, find_candidates, publish_source

from context_ledger.auth.principal import Principal
from context_ledger.db.migrate import migrate
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.embeddings.similarity import cosine
from context_ledger.http.retrieve import RetrieveRequest
from context_ledger.local.embeddings_server import serve_embeddings
from context_ledger.retrieval.cache import SearchCache
from context_ledger.retrieval.service import Dependencies, retrieve
from context_ledger.search.candidates import Candidate
from context_ledger.search.exact import uses_pgvector
from context_ledger.search.vectors import PgvectorUnavailableError, pgvector_available
from context_ledger.settings import SearchBackend, load_settings
from context_ledger.sources.model import Document
from context_ledger.spaces.service import create_organisation

DOCUMENTS = [
    Document("refunds.md", "Refunds need a receipt and the approval of a team lead."),
    Document("chargebacks.md", "Chargebacks are disputes the card issuer raises for a customer."),
    Document("holidays.md", "The office is closed on public holidays."),
]


@pytest.fixture
def plain_database(pg_server_uri: str) -> Iterator[tuple[str, str]]:
    """A migrated database owned by a role that is no superuser: (its URL, a superuser URL)."""
    role, password = f"ctxl_search_{secrets.token_hex(4)}", secrets.token_hex(16)
    name = f"ctxl_search_{secrets.token_hex(4)}"
    with psycopg.connect(pg_server_uri, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(role)
            )
        )
    url = make_conninfo(pg_server_uri, dbname=name, user=role, password=password)
    try:
        yield url, make_conninfo(pg_server_uri, dbname=name)
    finally:
        with psycopg.connect(pg_server_uri, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.fixture
def embedder() -> Iterator[EmbeddingsClient]:
    with serve_embeddings(dims=64) as server:
        yield EmbeddingsClient(server.url, "hashing-64", dimensions=64)


def indexed(conn: psycopg.Connection, embedder: EmbeddingsClient) -> tuple[Principal, uuid.UUID]:
    """An organisation with one published source of DOCUMENTS (embedded)."""
    org = create_organisation(conn, name="Plain")
    return admin_of(org), publish_source(conn, org, DOCUMENTS, embedder=embedder)


def candidates(
    conn: psycopg.Connection,
    admin: Principal,
    source: uuid.UUID,
    vector: list[float],
    backend: SearchBackend,
) -> list[Candidate]:
    return find_candidates(
        conn,
        org_id=admin.org_id,
        source_ids=[source],
        query="refund receipt",
        query_vector=vector,
        backend=backend,
    )


def test_exact_search_works_without_pgvector_through_the_sql_function(
    plain_database: tuple[str, str], embedder: EmbeddingsClient
) -> None:
    url, _ = plain_database
    migrate(url)
    vector = embedder.embed(["refund receipt"])[0]

    with psycopg.connect(url, row_factory=dict_row) as conn:
        admin, source = indexed(conn, embedder)
        found = candidates(conn, admin, source, vector, SearchBackend.EXACT)
        embeddings = {
            row["id"]: row["embedding"]
            for row in conn.execute("SELECT id, embedding FROM chunks").fetchall()
        }
        assert not pgvector_available(conn)
        assert not uses_pgvector(conn)

    similarity = {key: cosine(embedding, vector) for key, embedding in embeddings.items()}
    assert {c.chunk_id for c in found if c.found_by_vector} == {
        key for key, value in similarity.items() if value > 0
    }
    for candidate in found:
        expected = max(0.0, similarity[candidate.chunk_id])
        assert candidate.vector_score == pytest.approx(expected, abs=1e-6)
    [text_hit] = [c for c in found if c.found_by_text]
    assert text_hit.text_score == 1.0


def test_the_pgvector_backend_fails_closed_without_pgvector(
    plain_database: tuple[str, str], embedder: EmbeddingsClient
) -> None:
    url, _ = plain_database
    migrate(url)
    vector = embedder.embed(["refund receipt"])[0]

    with psycopg.connect(url, row_factory=dict_row) as conn:
        admin, source = indexed(conn, embedder)
        with pytest.raises(PgvectorUnavailableError) as raised:
            candidates(conn, admin, source, vector, SearchBackend.PGVECTOR)

    assert raised.value.status == 503


def test_the_pgvector_backend_fails_closed_with_the_vector_search_on_a_side_connection(
    plain_database: tuple[str, str], embedder: EmbeddingsClient
) -> None:
    url, _ = plain_database
    migrate(url)
    vector = embedder.embed(["refund receipt"])[0]

    with (
        psycopg.connect(url, row_factory=dict_row) as conn,
        psycopg.connect(url, row_factory=dict_row) as side,
    ):
        admin, source = indexed(conn, embedder)
        conn.commit()
        with pytest.raises(PgvectorUnavailableError):
            find_candidates(
                conn,
                org_id=admin.org_id,
                source_ids=[source],
                query="refund receipt",
                query_vector=vector,
                backend=SearchBackend.PGVECTOR,
                side_connection=side,
            )


def test_the_pgvector_backend_fails_closed_when_pgvector_is_dropped_after_use(
    plain_database: tuple[str, str], embedder: EmbeddingsClient
) -> None:
    url, superuser_url = plain_database
    with psycopg.connect(superuser_url, autocommit=True) as superuser:
        superuser.execute("CREATE EXTENSION vector")
    migrate(url)
    vector = embedder.embed(["refund receipt"])[0]
    with psycopg.connect(url, row_factory=dict_row) as conn:
        admin, source = indexed(conn, embedder)
        assert candidates(conn, admin, source, vector, SearchBackend.PGVECTOR)

    with psycopg.connect(superuser_url, autocommit=True) as superuser:
        superuser.execute("DROP EXTENSION vector CASCADE")

    with psycopg.connect(url, row_factory=dict_row) as conn:
        with pytest.raises(PgvectorUnavailableError):
            candidates(conn, admin, source, vector, SearchBackend.PGVECTOR)
        conn.rollback()  # as the failed request's transaction is
        # The next search checks again rather than trusting what this process saw before.
        with pytest.raises(PgvectorUnavailableError):
            candidates(conn, admin, source, vector, SearchBackend.PGVECTOR)


@pytest.mark.parametrize("published", [True, False], ids=["with-a-source", "with-no-source"])
@pytest.mark.parametrize("embeddings", [False, True], ids=["full-text-only", "hybrid"])
def test_every_retrieval_fails_closed_with_the_pgvector_backend_and_no_pgvector(
    plain_database: tuple[str, str], embedder: EmbeddingsClient, published: bool, embeddings: bool
) -> None:
    """Not only those with a query vector: the operator chose pgvector, so a full-text-only
    retrieval (no endpoint, or nothing to search) is 503 as well: no answer, no evidence."""
    url, _ = plain_database
    migrate(url)
    deps = Dependencies(
        settings=load_settings(KEYSTONE_CONTEXT_SEARCH_BACKEND="pgvector"),
        cache=SearchCache(),
        embedder=embedder if embeddings else None,
    )
    request = RetrieveRequest.model_validate({"query": "refund receipt"}).to_query()

    with psycopg.connect(url, row_factory=dict_row) as conn:
        org = create_organisation(conn, name="Plain")
        if published:
            publish_source(conn, org, DOCUMENTS, embedder=embedder if embeddings else None)
        conn.commit()
        with pytest.raises(PgvectorUnavailableError) as raised:
            retrieve(conn, admin_of(org), request, client_header=None, deps=deps)

    assert raised.value.status == 503
