"""The search tests' organisations and published sources, made one way, and the searches they
run: one step's candidates over some sources (:func:`find_candidates`) and a query's terms
(:func:`text_terms`), each through the production functions the retrieve step calls."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import psycopg

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.dlp.classification import Classification
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.search.candidates import Candidate, search_candidates, with_terms
from context_ledger.search.fulltext import TextTerms, pending_text_terms
from context_ledger.search.query import SearchQuery
from context_ledger.settings import DEFAULT_HNSW_EF_SEARCH, SearchBackend
from context_ledger.sources import service
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.service import Organisation


def admin_of(org: Organisation) -> Principal:
    """A context administrator of ``org``."""
    return Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


def publish_source(
    conn: psycopg.Connection,
    org: Organisation,
    documents: Sequence[Document],
    *,
    embedder: EmbeddingsClient | None = None,
    kind: SourceKind = SourceKind.DOCS,
    name: str = "docs",
    space_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """A new internal source in ``space_id`` (default: ``org``'s organisation space) with
    ``documents`` published as its current index version; its id."""
    admin = admin_of(org)
    source = service.create_source(
        conn,
        admin,
        space_id=space_id or org.space_id,
        kind=kind,
        name=name,
        classification=Classification.INTERNAL,
    )
    service.index_snapshot(conn, admin, source["id"], list(documents), embedder=embedder)
    return source["id"]


def find_candidates(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    source_ids: Sequence[uuid.UUID],
    query: str,
    query_vector: Sequence[float] | None,
    backend: SearchBackend,
    limit: int = 100,
    ef_search: int = DEFAULT_HNSW_EF_SEARCH,
    side_connection: psycopg.Connection | None = None,
) -> list[Candidate]:
    """Every chunk found by either search, in chunk id order (search/hybrid.py ranks them).

    Only the current index version of the given sources of ``org_id`` is searched. Without a
    query vector the search is full-text only. The pgvector backend raises
    PgvectorUnavailableError (503) when the database has no pgvector; it explores ``ef_search``
    candidates at a time (pgvector_backend.py). The query's terms are read first
    (``with_terms``); ``search_candidates`` does the rest, as in one part of a retrieval's
    search step.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if not source_ids:
        return []
    search = with_terms(
        conn,
        SearchQuery(org_id, source_ids, query, query_vector, limit),
        versions=query_vector is not None and backend is SearchBackend.PGVECTOR,
    )
    return search_candidates(
        conn, [search], backend=backend, ef_search=ef_search, side_connection=side_connection
    )


def text_terms(conn: psycopg.Connection, query: SearchQuery) -> TextTerms:
    """The query's terms with their BM25 weights over the searched versions (one statement)."""
    return pending_text_terms(conn, query).result().terms()
