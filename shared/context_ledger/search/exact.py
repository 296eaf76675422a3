"""The default vector backend: exact cosine similarity, with or without pgvector.

Every searchable chunk whose embedding has the query's dimension is scored, and the ``limit``
most similar are kept, so results never depend on an index. Two ways to compute the same cosine:

- ``cosine_similarity(real[], real[])``, the SQL function of migration 0002: works on any
  PostgreSQL, but costs tens of microseconds per row;
- pgvector's ``cosine_distance`` over ``embedding_vector`` where that column exists (the
  extension was created), about a hundred times cheaper. It is called as a function, not as the
  ``<=>`` operator, so the planner can never answer it from an HNSW index (approximately).

Which one applies is looked up once per process and database: the column comes and goes only with
migrations.
"""

from __future__ import annotations

from psycopg import Connection, sql

from context_ledger.db.pending import Pending
from context_ledger.search.fulltext import with_text_rank
from context_ledger.search.query import Hit, SearchQuery, pending_search
from context_ledger.search.vectors import pgvector_available
from context_ledger.sources.searchable import SEARCHABLE_CHUNKS

_SQL_FUNCTION_SIMILARITY = sql.SQL("cosine_similarity({embedding}, %(query_vector)s::real[])")
_PGVECTOR_SIMILARITY = sql.SQL(
    "CASE WHEN {dims_column} = {dims} THEN"
    " 1 - nullif(cosine_distance({vector}, %(query_vector)s::vector({dims})), 'NaN') END"
)

_SEARCH = sql.SQL(
    """
SELECT c.id AS chunk_id, c.source_id, c.index_version, {similarity} AS similarity
FROM {searchable}
  AND c.embedding_dims = {dims}
ORDER BY similarity DESC NULLS LAST, c.id
LIMIT %(limit)s
"""
)

_has_vector_column: dict[tuple[str, str, str], bool] = {}


def uses_pgvector(conn: Connection) -> bool:
    """Whether this database has pgvector's column (cached per process and database)."""
    info = conn.info
    key = (info.host, str(info.port), info.dbname)
    if key not in _has_vector_column:
        _has_vector_column[key] = pgvector_available(conn)
    return _has_vector_column[key]


def vector_dimensions(query: SearchQuery) -> int:
    """The query vector's dimension, which selects the chunks (and HNSW index) it compares with."""
    if not query.vector:
        raise ValueError("a vector search needs a query vector")
    return len(query.vector)


def similarity_sql(dimensions: int, *, pgvector: bool, table: str = "c") -> sql.Composed:
    """Cosine similarity of ``table``'s embedding and the parameter ``query_vector`` (``dimensions``
    values, a Float4Array or a list of floats); NULL when the dimensions differ or a vector is
    zero (NaN with pgvector)."""
    if not pgvector:
        return _SQL_FUNCTION_SIMILARITY.format(embedding=sql.Identifier(table, "embedding"))
    return _PGVECTOR_SIMILARITY.format(
        dims_column=sql.Identifier(table, "embedding_dims"),
        dims=sql.Literal(dimensions),
        vector=sql.Identifier(table, "embedding_vector"),
    )


def pending_exact_search(
    conn: Connection, query: SearchQuery, *, pgvector: bool
) -> Pending[list[Hit]]:
    """The ``query.limit`` searchable chunks most similar to ``query.vector``, with their text
    ranks, in no particular order, sent now and read later (db/pending.py). ``pgvector`` picks
    the way to compute (:func:`uses_pgvector`)."""
    dimensions = vector_dimensions(query)
    hits = _SEARCH.format(
        similarity=similarity_sql(dimensions, pgvector=pgvector),
        searchable=sql.SQL(SEARCHABLE_CHUNKS),
        dims=sql.Literal(dimensions),
    )
    return pending_search(conn, with_text_rank(hits), query)
