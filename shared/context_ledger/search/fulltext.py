"""Full-text search: an OR query over ``chunks.tsv``, ranked with ``ts_rank(tsv, query, 1)``.

Query. The query text plus the parts of its compound identifiers (``parseRefund`` → parse,
refund), the same text processing code chunks get at ingest, goes through
``to_tsvector('english', ...)``; each distinct lexeme becomes one operand of an OR tsquery. OR,
because a question shares only some of its words with the passage that answers it: AND queries
(``plainto_tsquery``, ``websearch_to_tsquery``) find nothing for most natural-language questions
(offline SciFact baseline: nDCG@10 .07 with AND, .60 with OR). The tsquery is built in SQL, each
lexeme quoted by PostgreSQL's own tsvector output (``array_to_tsvector(ARRAY[lexeme])::text``),
so user text never meets SQL or tsquery syntax. A query without lexemes (empty, punctuation, stop
words only) gives a NULL tsquery, which matches nothing.

Rank. ``ts_rank`` with normalisation flag 1 (divide by 1 + log of the document length), so a long
chunk does not win by size alone. ``ts_rank_cd`` rewards lexemes close together, which an OR query
of a whole question rarely has, and ranks such queries far worse.

Normalisation. ``ts_rank``'s scale depends on the query (how many lexemes, how frequent), and the
hybrid score needs both of its terms in [0, 1]. A text score is the rank divided by the highest
rank any searchable chunk gets for the same query: the top text hit scores 1.0 and the order is
kept. The highest rank is the first hit of the text search, which is exact; any other chunk's
rank for the query (filled in for chunks only the vector search found) divides by the same number
and stays in [0, 1].
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import Connection, sql
from psycopg.rows import class_row

from context_ledger.sources.chunking.identifiers import search_text
from context_ledger.sources.searchable import SEARCHABLE_CHUNKS

#: The OR tsquery of the parameter ``query_text``; NULL without lexemes.
TSQUERY = sql.SQL(
    "(SELECT string_agg(array_to_tsvector(ARRAY[lexeme])::text, ' | ')::tsquery"
    " FROM unnest(tsvector_to_array(to_tsvector('english', %(query_text)s))) AS lexeme)"
)

#: The raw rank of chunk ``c`` for the tsquery ``q.query``.
RANK = sql.SQL("ts_rank(c.tsv, q.query, 1)")

# The ``limit`` best-ranked searchable chunks, then whatever ``similarity`` (an expression over
# chunk ``c``) says about each of them: the vector score of a text hit costs one lookup per hit.
_TEXT_SEARCH = sql.SQL(
    """
SELECT hit.chunk_id, hit.source_id, hit.index_version, hit.rank, {similarity} AS similarity
FROM (
    SELECT c.id AS chunk_id, c.source_id, c.index_version, {rank} AS rank
    FROM (SELECT {tsquery} AS query) AS q, {searchable}
      AND c.tsv @@ q.query
    ORDER BY rank DESC, c.id
    LIMIT %(limit)s
) AS hit
JOIN chunks c ON c.id = hit.chunk_id
ORDER BY hit.rank DESC, hit.chunk_id
"""
)

# The rank of each chunk a vector search found (the ``hit`` subquery), NULL when it does not
# match the tsquery.
_WITH_RANK = sql.SQL(
    """
SELECT hit.chunk_id, hit.source_id, hit.index_version,
       CASE WHEN c.tsv @@ q.query THEN {rank} END AS rank, hit.similarity
FROM ({hits}) AS hit
JOIN chunks c ON c.id = hit.chunk_id
CROSS JOIN (SELECT {tsquery} AS query) AS q
"""
)


_NO_SIMILARITY = sql.SQL("NULL::float8")


@dataclass(frozen=True)
class SearchQuery:
    """What one search step looks for, where, and how many hits each search keeps.

    The text is searched as code would be indexed (identifiers split), whatever the sources.
    """

    org_id: uuid.UUID
    source_ids: Sequence[uuid.UUID]
    text: str
    vector: Sequence[float] | None
    limit: int

    def params(self) -> dict[str, Any]:
        """The parameters every search statement binds."""
        return {
            "org_id": self.org_id,
            "source_ids": list(self.source_ids),
            "query_text": search_text(self.text, code=True),
            "query_vector": None if self.vector is None else list(self.vector),
            "limit": self.limit,
        }


@dataclass(frozen=True)
class Hit:
    """A chunk one search found, with both raw scores: its ``ts_rank`` (None unless it matches
    the tsquery) and its cosine similarity (None without a comparable embedding)."""

    chunk_id: uuid.UUID
    source_id: uuid.UUID
    index_version: int
    rank: float | None
    similarity: float | None


def run(conn: Connection, statement: sql.Composed, query: SearchQuery) -> list[Hit]:
    """Execute a search statement (text or vector) and read its hits."""
    with conn.cursor(row_factory=class_row(Hit)) as cursor:
        return cursor.execute(statement, query.params()).fetchall()


def text_search(
    conn: Connection, query: SearchQuery, *, similarity: sql.Composable | None
) -> list[Hit]:
    """The ``query.limit`` best-ranked searchable chunks, best first.

    ``similarity`` (an expression over chunk ``c`` and the parameter ``query_vector``) fills in
    each hit's cosine similarity; None leaves it empty (no query vector).
    """
    statement = _TEXT_SEARCH.format(
        similarity=_NO_SIMILARITY if similarity is None else similarity,
        rank=RANK,
        tsquery=TSQUERY,
        searchable=sql.SQL(SEARCHABLE_CHUNKS),
    )
    return run(conn, statement, query)


def with_text_rank(hits: sql.Composable) -> sql.Composed:
    """A vector search statement (columns chunk_id, source_id, index_version, similarity) with
    each hit's raw text rank added."""
    return _WITH_RANK.format(hits=hits, rank=RANK, tsquery=TSQUERY)


def normalised(rank: float | None, top_rank: float | None) -> float:
    """A raw rank as a text score in [0, 1]: divided by the query's top rank; 0 without a match."""
    if not rank or not top_rank:
        return 0.0
    return rank / top_rank
