"""Full-text search: BM25 over ``chunks.tsv``, computed in PostgreSQL.

Query. The query text plus the parts of its compound identifiers (``parseRefund`` → parse,
refund; ``os.path.exists`` → os, path, exists), as code chunks get them at ingest, less the
fragments the indexed text also loses (``I'm``'s m, the initials of ``J. Smith``, ``e.g.``:
chunking/identifiers.py), goes through ``to_tsvector('english', ...)`` (stemming, English stop
words dropped); its distinct lexemes are the query terms. A query without lexemes (empty,
punctuation, stop words only) matches nothing.

Rank. Okapi BM25 (search/bm25.py): per query term, ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b +
b * dl / avgdl))``, summed. ``tf`` comes from the chunk's tsvector, ``dl`` is ``tsv_tokens``
(its tokens: the lexemes' positions summed, a stored column; migration 0019), and the collection
statistics (chunk count,
mean length, each lexeme's document frequency) are those of the searched sources' current index
versions, kept by the triggers of migration 0009 and summed here in one small statement. The
weights are computed in Python and bound as arrays, so user text never meets SQL or tsquery
syntax: lexemes come back from PostgreSQL already quoted as tsquery operands.

Matching (candidate generation). OR semantics, as a question shares only some of its words with
the passage that answers it, but not over every term: the search matches the query's rarest terms
while their document frequencies add up to at most
:data:`~context_ledger.search.bm25.MATCH_POSTINGS` chunks (always the rarest term), then ranks
those chunks by BM25 over all terms. A chunk holding only common terms of the query scores little,
so the ranking hardly changes (docs/decisions.md has the figures), but the search reads about a
thousand chunks instead of a fifth of the corpus (100k chunks: the OR of all of a question's
terms matches some 20k), and reading them is what costs. Beside a vector search (a query vector
in the ``SearchQuery``) the bound is :data:`~context_ledger.search.bm25.HYBRID_MATCH_POSTINGS`:
the vector search brings in what the narrower match leaves out, with its BM25 rank filled in.

Normalisation. BM25's scale depends on the query, and the hybrid score needs both of its terms in
[0, 1]: a text score is the rank divided by the best rank of the text search's hits, so the top
text hit scores 1.0 and the order is kept. A chunk only the vector search found gets its BM25 rank
over all terms filled in, divided by the same number and capped at 1 (it can only exceed the top
when it holds none of the matched terms and many common ones).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import Connection, Cursor, sql

from context_ledger.db.pending import Pending, send
from context_ledger.search.bm25 import K1, B, TermStats, query_terms
from context_ledger.search.query import Hit, SearchQuery, TextTerms, pending_search, query_texts
from context_ledger.sources.searchable import searchable_among

# Per searched source: the query's lexemes its version holds, with their document frequencies and
# how often the query repeats each (BM25's query-term frequency: counted in the words as written,
# so the parts of an identifier split out for matching add no repeats), quoted as tsquery operands
# by PostgreSQL; and one row without a lexeme holding the version's
# totals. Per source, so that any part of the searched sources (a level of the chain, those the
# caller may search) sums its own statistics in Python without another round trip.
# ``{searched}``: see term_stats_statement.
_TERM_STATS_OVER = """
WITH RECURSIVE {searched},
query_lexemes AS (
    SELECT lexeme, greatest(cardinality(positions), 1) AS repeats
    FROM unnest(to_tsvector('english', %(query_words)s))
)
SELECT s.id AS source_id, l.lexeme, array_to_tsvector(ARRAY[l.lexeme])::text AS operand,
       l.chunks::bigint AS chunks, 0::bigint AS tokens, coalesce(q.repeats, 1) AS repeats
FROM searched s
JOIN text_rank_lexemes l ON l.source_id = s.id AND l.index_version = s.index_version
LEFT JOIN query_lexemes q ON q.lexeme = l.lexeme
WHERE l.lexeme = ANY(tsvector_to_array(to_tsvector('english', %(query_text)s)))
UNION ALL
SELECT s.id, NULL, NULL, v.chunks, v.tokens, 0
FROM searched s
JOIN text_rank_versions v ON v.source_id = s.id AND v.index_version = s.index_version
"""


def term_stats_statement(searched: str) -> str:
    """The query terms' statement over the sources ``searched`` selects: common table
    expressions, the last one named ``searched`` (a source's ``id`` and ``index_version`` per
    row). It binds ``query_text`` (the words and identifier parts the terms are) and
    ``query_words`` (the words as written, whose repeats count) besides their parameters."""
    return _TERM_STATS_OVER.format(searched=searched)


_TERM_STATS = term_stats_statement(
    """searched AS (
    SELECT s.id, s.index_version FROM sources s
    WHERE s.org_id = %(org_id)s AND s.id = ANY(%(source_ids)s)
)"""
)


def rank_of(row: str) -> sql.Composed:
    """The BM25 rank of the chunk ``row`` (an alias with its ``tsv`` and ``tsv_tokens``: ``c``)
    for the bound terms; NULL when it holds none of them.

    The tsvector is first cut down to the query's lexemes by C functions (``setweight`` of the
    given lexemes to A, then ``ts_filter`` keeping A), so the per-chunk subquery reads the two or
    three lexemes that matter rather than the forty a chunk holds, and finds each one's weight
    by its position in the bound array instead of joining a second set. Same ranks as a join of
    ``unnest(c.tsv)`` with the terms, 2-3x faster at 100k chunks (docs/decisions.md).
    """
    return sql.SQL(
        """(
    SELECT sum((%(weights)s::float8[])[array_position(%(lexemes)s::text[], u.lexeme)]
               * u.tf * {k1_plus_1}
               / (u.tf + {k1} * (1 - {b} + {b} * {tokens} / %(average_length)s)))
    FROM (
        SELECT lexeme, greatest(cardinality(positions), 1) AS tf
        FROM unnest(ts_filter(setweight(setweight({tsv}, 'D'), 'A', %(lexemes)s::text[]), '{{a}}'))
    ) AS u
)"""
    ).format(
        k1_plus_1=sql.Literal(K1 + 1),
        k1=sql.Literal(K1),
        b=sql.Literal(B),
        tsv=sql.Identifier(row, "tsv"),
        tokens=sql.Identifier(row, "tsv_tokens"),
    )


#: The BM25 rank of chunk ``c`` (:func:`rank_of`).
RANK = rank_of("c")

# The ``limit`` best-ranked searchable chunks that hold a matched term, then whatever
# ``similarity`` (an expression over chunk ``c``) says about each of them: the vector score of a
# text hit costs one lookup per hit.
#
# The matching chunks are read from the full-text index alone, in a subquery the planner keeps
# apart (``OFFSET 0``), and only then held to the searched sources' current versions. Joined
# directly, a search of one source made the planner AND the index's few hundred matches with
# every chunk of the source from ``chunks_source_version`` (70,000 entries for the organisation
# of bench/retrieve.py's chain, 19 ms of a 21 ms statement). ``level``: the searched level as a
# literal, which lets the planner read that level's index (migration 0021); a bound parameter
# would not.
_MATCHING_CHUNKS = """(
        SELECT id, org_id, source_id, index_version, tsv, tsv_tokens FROM chunks
        WHERE org_id = %(org_id)s AND tsv @@ %(match)s::tsquery{level}
        OFFSET 0
    )"""

_TEXT_SEARCH = sql.SQL(
    """
SELECT hit.chunk_id, hit.source_id, hit.index_version, hit.rank, {similarity} AS similarity
FROM (
    SELECT c.id AS chunk_id, c.source_id, c.index_version, {rank} AS rank
    FROM {searchable}
    ORDER BY rank DESC, c.id
    LIMIT %(limit)s
) AS hit
JOIN chunks c ON c.id = hit.chunk_id
ORDER BY hit.rank DESC, hit.chunk_id
"""
)

# The rank of each chunk a vector search found (the ``hit`` subquery), NULL when it holds no term.
_WITH_RANK = sql.SQL(
    """
SELECT hit.chunk_id, hit.source_id, hit.index_version, {rank} AS rank, hit.similarity
FROM ({hits}) AS hit
JOIN chunks c ON c.id = hit.chunk_id
"""
)


_NO_SIMILARITY = sql.SQL("NULL::float8")


@dataclass(frozen=True)
class TermCounts:
    """The query's lexemes as each searched source's current version holds them: per source,
    each lexeme's document frequency and the version's chunk and lexeme totals."""

    operands: Mapping[str, str] = field(default_factory=dict)  # lexeme -> tsquery operand
    frequencies: Mapping[uuid.UUID, Mapping[str, int]] = field(default_factory=dict)
    totals: Mapping[uuid.UUID, tuple[int, int]] = field(default_factory=dict)  # chunks, tokens
    repeats: Mapping[str, int] = field(default_factory=dict)  # lexeme -> times in the query

    def terms(
        self,
        sources: Sequence[uuid.UUID] | None = None,
        *,
        matched_in: Sequence[uuid.UUID] | None = None,
    ) -> TextTerms:
        """The terms over ``sources`` (default: every source counted), the matched ones chosen
        by their frequencies in ``matched_in`` (default: the same sources)."""
        over = list(self.totals) if sources is None else list(sources)
        chunks = self.chunks(over)
        tokens = sum(self.totals.get(s, (0, 0))[1] for s in over)
        counted = query_terms(
            self._stats(over),
            chunks=chunks,
            tokens=tokens,
            matched_in=None if matched_in is None else self._stats(matched_in),
        )
        if not counted.lexemes:
            return TextTerms()
        return TextTerms(
            counted.lexemes,
            counted.weights,
            counted.match,
            counted.hybrid_match,
            counted.average_length,
        )

    def chunks(self, sources: Sequence[uuid.UUID]) -> int:
        """How many chunks the current versions of ``sources`` hold."""
        return sum(self.totals.get(source, (0, 0))[0] for source in sources)

    def _stats(self, sources: Sequence[uuid.UUID]) -> list[TermStats]:
        frequencies: dict[str, int] = {}
        for source in sources:
            for lexeme, chunks in self.frequencies.get(source, {}).items():
                frequencies[lexeme] = frequencies.get(lexeme, 0) + chunks
        return [
            TermStats(lexeme, self.operands[lexeme], n, self.repeats.get(lexeme, 1))
            for lexeme, n in frequencies.items()
        ]


def pending_text_terms(conn: Connection, query: SearchQuery) -> Pending[TermCounts]:
    """The query's term counts per searched source, sent now and read later (db/pending.py);
    their ``terms()`` are the query's terms with their BM25 weights over the searched versions."""
    return send(conn, _TERM_STATS, query.params(), _read_counts)


def pending_terms_of(
    conn: Connection, statement: str, params: dict[str, Any], text: str
) -> Pending[TermCounts]:
    """The term counts of ``text`` by a :func:`term_stats_statement` binding ``params``, sent
    now and read later."""
    return send(conn, statement, {**params, **query_texts(text)}, _read_counts)


_HAS_TERMS = "SELECT to_tsvector('english', %(query_text)s) <> ''::tsvector AS has_terms"


def has_terms(conn: Connection, text: str) -> bool:
    """Whether ``text`` has any term at all, whatever the sources hold: a query of stop words,
    punctuation and fragments (``I'm``, ``e.g.``) has none and matches nothing by full-text."""
    params = {"query_text": query_texts(text)["query_text"]}
    return send(conn, _HAS_TERMS, params, lambda cursor: cursor.fetchone()["has_terms"]).result()


def _read_counts(cursor: Cursor[dict[str, Any]]) -> TermCounts:
    operands: dict[str, str] = {}
    frequencies: dict[uuid.UUID, dict[str, int]] = {}
    totals: dict[uuid.UUID, tuple[int, int]] = {}
    repeats: dict[str, int] = {}
    for row in cursor.fetchall():
        if row["lexeme"] is None:
            totals[row["source_id"]] = (row["chunks"], row["tokens"])
        else:
            operands[row["lexeme"]] = row["operand"]
            frequencies.setdefault(row["source_id"], {})[row["lexeme"]] = row["chunks"]
            repeats[row["lexeme"]] = row["repeats"]
    return TermCounts(operands, frequencies, totals, repeats)


def text_search(
    conn: Connection, query: SearchQuery, *, similarity: sql.Composable | None
) -> list[Hit]:
    """The ``query.limit`` best-ranked searchable chunks, best first.

    ``similarity`` (an expression over chunk ``c`` and the parameter ``query_vector``) fills in
    each hit's cosine similarity; None leaves it empty (no query vector).
    """
    return pending_text_search(conn, query, similarity=similarity).result()


def pending_text_search(
    conn: Connection, query: SearchQuery, *, similarity: sql.Composable | None
) -> Pending[list[Hit]]:
    """:func:`text_search`, sent now and read later (db/pending.py)."""
    if not query.terms.match:
        return Pending(list)
    statement = _TEXT_SEARCH.format(
        similarity=_NO_SIMILARITY if similarity is None else similarity,
        rank=RANK,
        searchable=sql.SQL(searchable_among(_MATCHING_CHUNKS)).format(
            level=sql.SQL("")
            if query.level is None
            else sql.SQL(" AND space_level = {}").format(sql.Literal(query.level.value))
        ),
    )
    return pending_search(conn, statement, query)


def with_text_rank(hits: sql.Composable) -> sql.Composed:
    """A vector search statement (columns chunk_id, source_id, index_version, similarity) with
    each hit's raw text rank added."""
    return _WITH_RANK.format(hits=hits, rank=RANK)


def normalised(rank: float | None, top_rank: float | None) -> float:
    """A raw rank as a text score in [0, 1]: divided by the query's top rank and capped at 1;
    0 without a match."""
    if not rank or not top_rank:
        return 0.0
    return min(1.0, rank / top_rank)
