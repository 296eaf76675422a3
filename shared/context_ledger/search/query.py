"""What every search step binds and answers, whichever backend runs it: the query
(:class:`SearchQuery`, with the text terms full-text search computed for it), the hits
(:class:`Hit`), and how a search statement is sent in a pipeline (:func:`pending_search`).

The backends (``fulltext``, ``exact``, ``pgvector_backend``) and the candidate step
(``candidates``) all speak these types; none of them reaches into another backend for them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from psycopg import Connection, sql
from psycopg.cursor import BaseCursor
from psycopg.rows import RowMaker

from context_ledger.db.float4_array import Float4Array
from context_ledger.db.pending import Pending
from context_ledger.sources.chunking.identifiers import search_text, without_fragments
from context_ledger.spaces.levels import Level


@dataclass(frozen=True)
class TextTerms:
    """The query's terms as the searched chunks know them: BM25 weights, the terms the text
    search matches (alone, and beside a vector search), and the mean chunk length. Empty when no
    searched chunk holds a term."""

    lexemes: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    match: tuple[str, ...] = ()  # tsquery operands, quoted
    hybrid_match: tuple[str, ...] = ()  # the same, within bm25.HYBRID_MATCH_POSTINGS
    average_length: float = 1.0

    def params(self, *, hybrid: bool) -> dict[str, Any]:
        return {
            "lexemes": list(self.lexemes),
            "weights": list(self.weights),
            "match": " | ".join(self.hybrid_match if hybrid else self.match) or None,
            "average_length": self.average_length,
        }


@dataclass(frozen=True)
class SearchQuery:
    """What one search step looks for, where, and how many hits each search keeps.

    The text is searched as code would be indexed (identifiers split), whatever the sources.
    ``terms`` are the query's term counts read by ``search.fulltext.pending_text_terms`` (or
    the chain's, ``retrieval/chain.py``), weighted (without them no chunk has a text rank);
    ``versions`` and ``levels``, the current index version and the space level of each searched
    source, as read in the same step (``sources.searchable.pending_current_versions``; only the
    HNSW statement needs them: it searches each level's index with the versions as filters).
    ``level``: the space level every searched source is of, so the text search reads that
    level's full-text index (migration 0021); without it (sources of several levels) the text
    search has no index to read and scans the chunks.
    ``chunks``: a size hint, never a filter.
    """

    org_id: uuid.UUID
    source_ids: Sequence[uuid.UUID]
    text: str
    vector: Sequence[float] | None
    limit: int
    terms: TextTerms = field(default_factory=TextTerms)
    versions: Mapping[uuid.UUID, int] = field(default_factory=dict)
    levels: Mapping[uuid.UUID, Level] = field(default_factory=dict)
    level: Level | None = None
    #: how many chunks the searched sources' current versions hold (the terms' counts), which
    #: search/candidates.py schedules the statements by; 0 when not known
    chunks: int = 0

    def params(self) -> dict[str, Any]:
        """The parameters every search statement binds."""
        return {
            "org_id": self.org_id,
            "source_ids": list(self.source_ids),
            **query_texts(self.text),
            "query_vector": None if self.vector is None else Float4Array(self.vector),
            "limit": self.limit,
            **self.terms.params(hybrid=self.vector is not None),
            **{
                name: value
                for n, group in enumerate(self.version_groups(), start=1)
                for name, value in (
                    (f"version_{n}", group.version),
                    (f"version_sources_{n}", group.sources),
                )
            },
        }

    def version_groups(self) -> list[VersionGroup]:
        """The searched sources by level and current version (bound as ``version_<n>`` and
        ``version_sources_<n>``, n from 1 in this order), in level and version order."""
        groups: dict[tuple[Level, int], list[uuid.UUID]] = {}
        for source, version in self.versions.items():
            groups.setdefault((self.levels[source], version), []).append(source)
        return [
            VersionGroup(level, version, sources)
            for (level, version), sources in sorted(groups.items())
        ]


class VersionGroup(NamedTuple):
    """Searched sources of one level at one index version."""

    level: Level
    version: int
    sources: list[uuid.UUID]


class Hit(NamedTuple):
    """A chunk one search found, with both raw scores: its BM25 rank (None unless it holds a
    query term) and its cosine similarity (None without a comparable embedding)."""

    chunk_id: uuid.UUID
    source_id: uuid.UUID
    index_version: int
    rank: float | None
    similarity: float | None


def processed_query(text: str) -> str:
    """The text whose lexemes are the query terms."""
    return search_text(text, code=True)


def query_texts(text: str) -> dict[str, str]:
    """The query's two texts as the term statement binds them (search/fulltext.py):
    ``query_text``, whose lexemes are the terms, and ``query_words``, the words as written
    (less their fragments, as the terms are), whose repeats count."""
    return {"query_text": processed_query(text), "query_words": without_fragments(text)}


def _hits(cursor: BaseCursor[Any, Any]) -> RowMaker[Hit]:
    """Rows as :class:`Hit` by position (hundreds a search: a keyword call for each cost ~1 ms
    a request), once the statement's columns are checked to be Hit's, in its order."""
    names = tuple(column.name for column in cursor.description or ())
    if names != Hit._fields:
        raise RuntimeError(f"a search statement's columns {names} are not {Hit._fields}")
    return Hit._make


def pending_search(
    conn: Connection, statement: sql.Composed, query: SearchQuery
) -> Pending[list[Hit]]:
    """Send a search statement (text or vector) now; its hits are read later (in a pipeline:
    once synchronised, db/pending.py)."""
    cursor = conn.cursor(row_factory=_hits).execute(statement, query.params())

    def hits() -> list[Hit]:
        with cursor:
            return cursor.fetchall()

    return Pending(hits)
