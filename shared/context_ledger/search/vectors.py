"""Vector storage at run time: pgvector detection and the per-dimension and level HNSW indexes
(the vectors themselves are written by their table's owner: ``sources.store.store_embeddings``).

``chunks.embedding`` (real[]) is the stored vector for both backends; ``embedding_dims`` and, with
pgvector, ``embedding_vector`` are generated from it (migration 0002). An HNSW index needs a fixed
dimension, and that comes from configuration, so each dimension in use gets partial indexes, of
half-precision vectors, one per space level (``chunks.space_level``, migration 0017):

    chunks_embedding_hnsw_half_<N>_<level> ON chunks
        USING hnsw ((embedding_vector::halfvec(N)) halfvec_cosine_ops)
        WHERE embedding_dims = N AND space_level = '<level>'

A query uses one only when it orders by that same expression and its WHERE implies the predicate
with the dimension and level written as literals (a ``$1`` would not prove the predicate in a
generic plan): :func:`vector_search_sql` spells both, and the full-precision similarity to report.

Why per level: a retrieval searches each level of its chain apart (retrieval/service.py), and
HNSW filters after the scan, so with one graph for every level a level holding a tenth of the
chunks walked about ten times the tuples it kept. In its own level's graph a level's scan walks
about what a search of the whole chain did: at 100k chunks, the project level's top 100 took
2.2 ms p50 instead of 17.3 (docs/decisions.md, "Vector indexes per level").

Why half precision: the index is half the size and its scan 1.5x faster at 100k chunks for the
same recall@10 against exact search (docs/decisions.md), and it takes up to 4,000 dimensions
(``vector`` HNSW: 2,000). The graph only chooses which chunks come back; their similarity is then
computed from the full-precision vector, so scores are the same as the exact backend's.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg.rows import scalar_row

from context_ledger.db.pending import Pending, send
from context_ledger.errors import ServiceUnavailableError
from context_ledger.spaces.levels import Level

#: pgvector's HNSW limit for the ``halfvec`` type.
MAX_HNSW_DIMENSIONS = 4000
_INDEX_LOCK_KEY = 0x686E7377  # "hnsw": serialises concurrent ensure_vector_index calls

_HAS_VECTOR_COLUMN = """
SELECT EXISTS (
    SELECT 1 FROM pg_attribute
    WHERE attrelid = to_regclass('chunks') AND attname = 'embedding_vector' AND NOT attisdropped
)
"""

_LOCK_INDEX_BUILDS = "SELECT pg_advisory_xact_lock(%(key)s)"
_COUNT_INDEXES = """
SELECT count(*) FROM pg_indexes
WHERE schemaname = current_schema() AND tablename = 'chunks' AND indexname = ANY(%(names)s)
"""

_CREATE_INDEX = sql.SQL(
    "CREATE INDEX IF NOT EXISTS {name} ON chunks"
    " USING hnsw ((embedding_vector::halfvec({dims})) halfvec_cosine_ops)"
    " WHERE embedding_dims = {dims} AND space_level = {level}"
)


class PgvectorUnavailableError(ServiceUnavailableError):
    """The pgvector backend is configured but this database has no pgvector column (fail closed)."""


@dataclass(frozen=True)
class VectorSearchSql:
    """The fragments an HNSW-served query needs, for one dimension.

    ``predicate`` goes in the WHERE clause; ``distance`` (half-precision cosine distance, 0 to 2)
    in ORDER BY; ``similarity`` (1 - the full-precision cosine distance) in the select list. The
    query vector is the named parameter ``query_vector``, a ``real[]`` (db/float4_array.py) or a
    list of floats (``float8[]``), cast to the vector type.
    """

    predicate: sql.Composed
    distance: sql.Composed
    similarity: sql.Composed


def index_name(dimensions: int, level: Level) -> str:
    return f"chunks_embedding_hnsw_half_{dimensions}_{level}"


def _check_dimensions(dimensions: int) -> None:
    if type(dimensions) is not int or not 1 <= dimensions <= MAX_HNSW_DIMENSIONS:
        raise ValueError(f"an HNSW index takes 1 to {MAX_HNSW_DIMENSIONS} dimensions")


def pgvector_available(conn: psycopg.Connection) -> bool:
    """True when migration 0002 could create pgvector's column (the extension was there)."""
    with conn.cursor(row_factory=scalar_row) as cursor:
        return bool(cursor.execute(_HAS_VECTOR_COLUMN).fetchone())


def pending_pgvector_available(conn: psycopg.Connection) -> Pending[bool]:
    """:func:`pgvector_available`, sent now and read later (db/pending.py): in a pipeline it
    shares a round trip with the statements beside it."""
    return send(conn, _HAS_VECTOR_COLUMN, {}, lambda cursor: bool(cursor.fetchone()["exists"]))


def require_pgvector(available: Pending[bool]) -> None:
    """Fail closed (503) when the pgvector backend is configured and pgvector is not there."""
    if not available.result():
        raise PgvectorUnavailableError("the pgvector search backend is not available")


def ensure_vector_index(conn: psycopg.Connection, dimensions: int) -> list[str]:
    """Create the HNSW indexes for ``dimensions``, one per level, unless they exist; return
    their names.

    The builds take a lock that blocks writes to chunks (not reads) while they run, once per
    dimension. Raises PgvectorUnavailableError without pgvector.
    """
    _check_dimensions(dimensions)
    if not pgvector_available(conn):
        raise PgvectorUnavailableError("the pgvector search backend is not available")
    names = [index_name(dimensions, level) for level in Level]
    if _existing_indexes(conn, names) == len(names):
        return names  # a process's first search, usually: one catalog read, no lock
    with conn.transaction():
        conn.execute(_LOCK_INDEX_BUILDS, {"key": _INDEX_LOCK_KEY})
        for level, name in zip(Level, names, strict=True):
            conn.execute(
                _CREATE_INDEX.format(
                    name=sql.Identifier(name),
                    dims=sql.Literal(dimensions),
                    level=sql.Literal(level.value),
                )
            )
    return names


def _existing_indexes(conn: psycopg.Connection, names: list[str]) -> int:
    with conn.cursor(row_factory=scalar_row) as cursor:
        return int(cursor.execute(_COUNT_INDEXES, {"names": names}).fetchone() or 0)


def vector_search_sql(dimensions: int, level: Level, *, table: str = "chunks") -> VectorSearchSql:
    """The predicate and distance matching :func:`ensure_vector_index`'s index of ``level`` on
    ``table`` (the table's name or its alias in the query)."""
    _check_dimensions(dimensions)
    column = sql.Identifier(table, "embedding_vector")
    dims = sql.Literal(dimensions)
    return VectorSearchSql(
        predicate=sql.SQL("{} = {} AND {} = {}").format(
            sql.Identifier(table, "embedding_dims"),
            dims,
            sql.Identifier(table, "space_level"),
            sql.Literal(Level(level).value),
        ),
        distance=sql.SQL("{column}::halfvec({dims}) <=> %(query_vector)s::halfvec({dims})").format(
            column=column, dims=dims
        ),
        similarity=sql.SQL(
            "1 - nullif({column}::vector({dims}) <=> %(query_vector)s::vector({dims}), 'NaN')"
        ).format(column=column, dims=dims),
    )
