"""The ``pgvector`` backend: approximate nearest neighbours through a per-dimension HNSW index.

The index is ensured (created unless it exists) once per process, database and dimension; the
first search of a dimension pays for the build. Without pgvector every search raises
:class:`PgvectorUnavailableError` (503): the operator asked for this backend, so it fails closed
rather than falling back to the exact one.

Two settings apply to each search, for its transaction only (``SET LOCAL`` semantics): the
caller's transaction, or on a connection in autocommit mode (the side connection of
search/candidates.py) the implicit one PostgreSQL runs the pipelined settings and search in, which
ends at their one Sync. No BEGIN, COMMIT or savepoint: those cost a round trip or more each.

- ``hnsw.ef_search``, the candidate list size (pgvector's default 40): the caller's, from
  ``KEYSTONE_CONTEXT_HNSW_EF_SEARCH`` (default ``settings.DEFAULT_HNSW_EF_SEARCH``).
- ``hnsw.iterative_scan = relaxed_order``: the index knows nothing of organisations and sources,
  so rows of other sources are filtered out after the scan. Without iterative scans a small
  source in a large table would get few or no hits, and no search could return more than
  ``ef_search`` rows; with them the scan goes on until ``limit`` rows pass the filter (or
  ``hnsw.max_scan_tuples`` is reached). Relaxed order is enough: the step re-ranks hits anyway.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg
from psycopg import Connection, sql

from context_ledger.db.pending import Pending
from context_ledger.search.exact import vector_dimensions
from context_ledger.search.fulltext import rank_of
from context_ledger.search.query import Hit, SearchQuery, pending_search
from context_ledger.search.vectors import (
    PgvectorUnavailableError,
    ensure_vector_index,
    vector_search_sql,
)
from context_ledger.spaces.levels import Level

_SETTINGS = sql.SQL(
    "SELECT set_config('hnsw.ef_search', {ef_search}, true),"
    " set_config('hnsw.iterative_scan', 'relaxed_order', true)"
)

# ORDER BY the bare distance, so the planner can answer it from the HNSW index. The visibility
# rule of SEARCHABLE_CHUNKS (organisation, sources, current index version) is written as filters on
# chunk columns here: joining `sources` makes the planner scan the table instead of the index
# (bench/retrieve.py at 100k chunks: 629 ms → 23 ms p50 for this statement). The current versions
# are parameters (:func:`_current_versions`), not a subquery per row: the planner then estimates
# the rows from the column statistics. A subquery counts as matching 0.5% of the rows, and for a
# source of 10k chunks that made a seq scan and a sort look cheaper than the index: 75 ms instead
# of 7 (docs/decisions.md).
_SEARCH = sql.SQL(
    """
SELECT c.id AS chunk_id, c.source_id, c.index_version, {similarity} AS similarity, c.tsv,
       c.tsv_tokens
FROM chunks c
WHERE c.org_id = %(org_id)s AND {current_versions}
  AND {predicate}
ORDER BY {distance}
LIMIT %(limit)s
"""
)

_NEAREST_OF_LEVELS = sql.SQL(
    "SELECT * FROM ({}) AS nearest ORDER BY similarity DESC NULLS LAST LIMIT %(limit)s"
)

# Each hit's raw text rank, from the tsvector the scan already read: no second lookup of its row
# (search/fulltext.py's with_text_rank joins `chunks` again, which the exact search needs).
_WITH_RANK = sql.SQL(
    "SELECT hit.chunk_id, hit.source_id, hit.index_version, {rank} AS rank, hit.similarity"
    " FROM ({hits}) AS hit"
)
_HIT_RANK = rank_of("hit")


def _current_versions(groups: Sequence[int]) -> sql.Composed:
    """``c`` belongs to one of the searched sources at that source's current version, for the
    sources of the given groups of one version each (numbered as ``SearchQuery.version_groups``).

    Once the parameters are bound, each group is a constant version and a constant list of
    sources, which the planner estimates; and the sources of a group are looked up in a hashed
    list, so a chain with hundreds of sources costs about what one costs. (Two lists, sources and
    versions, would also admit one source's rows at another's version.)"""
    group = sql.SQL("(c.index_version = {version}::int AND c.source_id = ANY({sources}::uuid[]))")
    return sql.SQL("({})").format(
        sql.SQL(" OR ").join(
            group.format(
                version=sql.Placeholder(f"version_{n}"),
                sources=sql.Placeholder(f"version_sources_{n}"),
            )
            for n in groups
        )
    )


def _nearest(query: SearchQuery, dimensions: int) -> sql.Composed:
    """The statement of the ``query.limit`` nearest searchable chunks: one index scan per level
    of the searched sources, each in its own level's graph, and over several levels the nearest
    of their hits (the nearest of each level include the nearest of all)."""
    numbered: dict[Level, list[int]] = {}
    for n, group in enumerate(query.version_groups(), start=1):
        numbered.setdefault(group.level, []).append(n)
    scans = []
    for level, groups in numbered.items():
        search = vector_search_sql(dimensions, level, table="c")
        scans.append(
            _SEARCH.format(
                distance=search.distance,
                predicate=search.predicate,
                similarity=search.similarity,
                current_versions=_current_versions(groups),
            )
        )
    if len(scans) == 1:
        return scans[0]
    return _NEAREST_OF_LEVELS.format(
        sql.SQL(" UNION ALL ").join(sql.SQL("({})").format(scan) for scan in scans)
    )


_indexed: set[tuple[str, str, str, int]] = set()


def _ensure_index(conn: Connection, dimensions: int) -> None:
    info = conn.info
    key = (info.host, str(info.port), info.dbname, dimensions)
    if key not in _indexed:
        ensure_vector_index(conn, dimensions)  # raises PgvectorUnavailableError
        _indexed.add(key)


def pending_hnsw_search(
    conn: Connection, query: SearchQuery, *, ef_search: int
) -> Pending[list[Hit]]:
    """About the ``query.limit`` searchable chunks nearest to ``query.vector``, with their text
    ranks, in no particular order, exploring ``ef_search`` candidates at a time; sent now and
    read later (db/pending.py).

    Send it inside a pipeline, whose one transaction the settings apply to, within
    :func:`pgvector_errors`: without pgvector it raises PgvectorUnavailableError. The first
    search of a dimension in this process first ensures its index, at once."""
    dimensions = vector_dimensions(query)
    _ensure_index(conn, dimensions)
    if not query.versions:
        return Pending(list)  # no searched source has a published version
    hits = _nearest(query, dimensions)
    conn.execute(_SETTINGS.format(ef_search=sql.Literal(str(ef_search))))
    return pending_search(conn, _WITH_RANK.format(rank=_HIT_RANK, hits=hits), query)


@contextmanager
def pgvector_errors() -> Iterator[None]:
    """A vector search failing because pgvector (its type, its column) was dropped after this
    process ensured its index raises PgvectorUnavailableError, and every index is ensured again
    at the next search (which fails closed while pgvector stays gone)."""
    try:
        yield
    except (psycopg.errors.UndefinedObject, psycopg.errors.UndefinedColumn) as exc:
        _indexed.clear()
        raise PgvectorUnavailableError("the pgvector search backend is not available") from exc
