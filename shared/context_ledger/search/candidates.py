"""The search step's candidates: full-text hits and vector hits, each with both scores.

Two statements: the text search (top ``limit`` by rank) and, with a query vector, the vector
search (top ``limit`` by cosine). Each fills in the other score of its own hits, the cosine of a
text hit and the rank of a vector hit, so every candidate's two scores are comparable whichever
search found it:

- ``text_score``: BM25 rank / the query's top rank (search/fulltext.py), 0 without a match;
- ``vector_score``: cosine similarity (1 - cosine distance) clamped to [0, 1], 0 without an
  embedding of the query's dimension.

A search "found" a chunk when the chunk scores at least as well, on that search's own score, as
the search's last hit, i.e. when the chunk belongs to that search's top ``limit``. A vector
search that returned fewer than ``limit`` hits saw every comparable embedding, so any cosine above
0 counts; the text search only ever reads the chunks holding the query's rarest terms
(search/fulltext.py), so its last hit is the bar even then, and a chunk holding only common query
terms is found by text only when it ranks as well as a chunk the search returned. For exact
vector search that is the set of hits itself; for HNSW it also counts a text hit the approximate
scan missed although its cosine beats the scan's last hit, so the tiers of search/hybrid.py do
not depend on the backend's misses. A chunk whose score is 0 (no match, no comparable embedding,
cosine at or below 0) is never found by that search, and a hit found by neither (a vector hit
with cosine at or below 0) is dropped.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import NamedTuple

from psycopg import Connection

from context_ledger.db import autocommit
from context_ledger.db.pending import Pending
from context_ledger.search.exact import pending_exact_search, similarity_sql, uses_pgvector
from context_ledger.search.fulltext import normalised, pending_text_search, pending_text_terms
from context_ledger.search.pgvector_backend import pending_hnsw_search, pgvector_errors
from context_ledger.search.query import Hit, SearchQuery
from context_ledger.settings import DEFAULT_HNSW_EF_SEARCH, SearchBackend
from context_ledger.sources.searchable import pending_current_versions


class Candidate(NamedTuple):
    """A chunk found by at least one search, with both scores in [0, 1]."""

    chunk_id: uuid.UUID
    source_id: uuid.UUID
    index_version: int
    text_score: float
    vector_score: float
    found_by_text: bool
    found_by_vector: bool


def vector_score(similarity: float | None) -> float:
    """Cosine similarity as a score in [0, 1]; 0 when there is none."""
    if similarity is None or math.isnan(similarity):
        return 0.0
    return min(1.0, max(0.0, similarity))


def search_candidates(
    conn: Connection,
    searches: Sequence[SearchQuery],
    *,
    backend: SearchBackend,
    ef_search: int = DEFAULT_HNSW_EF_SEARCH,
    side_connection: Connection | None = None,
) -> list[Candidate]:
    """Every chunk found by either search, in chunk id order (search/hybrid.py ranks them), for
    searches whose terms were read (:func:`pending_terms`, :func:`with_terms`; with the sources'
    current versions for the pgvector backend): one text search and, with a query vector, one
    vector search per :class:`SearchQuery`, each keeping its own ``limit`` hits. Only the
    current index version of each search's sources of its organisation is searched; without a
    query vector a search is full-text only. The pgvector backend raises
    PgvectorUnavailableError (503) when the database has no pgvector; it explores
    ``ef_search`` candidates at a time (pgvector_backend.py).

    Several searches are the parts of one step (a chain's levels, retrieval/service.py), so
    each part contributes its best even where another part holds many stronger matches; their
    text scores share one scale (the best rank of all), and "found by" is decided within each
    part (:func:`merge`). All the statements travel in one round trip; with a
    ``side_connection`` the vector statements run on it while the text statements run on
    ``conn`` (over several parts with the smallest part's vector statement): they take about
    as long as the slower side instead of both together.
    """
    searches = [search for search in searches if search.source_ids]
    limits = [search.limit for search in searches]
    vectors = [search.vector for search in searches if search.vector is not None]
    if not vectors:
        with conn.pipeline():
            texts = [pending_text_search(conn, search, similarity=None) for search in searches]
        return merge([(text.result(), [], n) for text, n in zip(texts, limits, strict=True)])
    pgvector = backend is SearchBackend.PGVECTOR or uses_pgvector(conn)
    similarity = similarity_sql(len(vectors[0]), pgvector=pgvector)
    errors = pgvector_errors() if backend is SearchBackend.PGVECTOR else nullcontext()

    def send_vectors(connection: Connection, picked: set[int]) -> dict[int, Pending[list[Hit]]]:
        return {
            n: _pending_vector_search(connection, search, backend, pgvector, ef_search)
            for n, search in enumerate(searches)
            if n in picked
        }

    def send_texts() -> list[Pending[list[Hit]]]:
        return [
            pending_text_search(
                conn, search, similarity=None if search.vector is None else similarity
            )
            for search in searches
        ]

    with errors:
        with_vector = {n for n, search in enumerate(searches) if search.vector is not None}
        if side_connection is None:
            # One round trip. The vector searches go first, so a pgvector backend without
            # pgvector fails (503) before the text searches need its column.
            with conn.pipeline():
                vector = send_vectors(conn, with_vector)
                text = send_texts()
            text_hits = [pending.result() for pending in text]
            vector_hits = _read(vector, len(searches))
        else:
            # The vector statements are sent on the side connection, the text statements run
            # on the request's, and the request's thread reads both: no thread to hand the
            # search to, whose start cost 0.5-1 ms p50 and 3-4 ms p95 here
            # (docs/decisions.md). In autocommit mode the HNSW settings and the searches are
            # one implicit transaction, ended by the pipeline's Sync. Over several levels the
            # request's connection also takes the smallest level's vector statement, so the
            # two connections finish closer together (:func:`_beside_texts`).
            beside = _beside_texts(searches, with_vector)
            with autocommit(side_connection):
                with side_connection.pipeline():
                    side = send_vectors(side_connection, with_vector - beside)
                    with conn.pipeline():
                        vector = send_vectors(conn, beside)
                        text = send_texts()
                    text_hits = [pending.result() for pending in text]
                    vector.update(side)
                vector_hits = _read(vector, len(searches))
    return merge(list(zip(text_hits, vector_hits, limits, strict=True)))


def _beside_texts(searches: Sequence[SearchQuery], with_vector: set[int]) -> set[int]:
    """Which vector statements the request's connection sends beside the text statements:
    none for one, else the one over the fewest chunks.

    A vector statement over a level's HNSW graph costs more than a text statement, and more the
    larger the graph (bench/retrieve.py's 100k chain: 6.5 / 3.5 / 2.7 ms for 70k / 20k / 10k
    chunks, a text statement ~1.8 ms), so with every vector statement on the side connection
    the request's waited some 5 ms for it; with the smallest level's beside the texts, both
    connections carry about half (docs/decisions.md)."""
    if len(with_vector) < 2:
        return set()
    return {min(with_vector, key=lambda n: (searches[n].chunks, -n))}


def _read(pending: dict[int, Pending[list[Hit]]], count: int) -> list[list[Hit]]:
    """The hits of every search, in order: none for a search without a vector statement."""
    return [pending[n].result() if n in pending else [] for n in range(count)]


def pending_terms(conn: Connection, search: SearchQuery, *, versions: bool) -> Pending[SearchQuery]:
    """``search`` with its terms and, for the HNSW statement (``versions``), the searched
    sources' current versions and levels: the statements are sent now, and in a pipeline they travel
    together; read after its block, they cost one round trip (db/pending.py)."""
    counts = pending_text_terms(conn, search)
    if not versions:
        return Pending(lambda: replace(search, terms=counts.result().terms()))
    current = pending_current_versions(
        conn, org_id=search.org_id, source_ids=list(search.source_ids)
    )

    def read() -> SearchQuery:
        sources = current.result()
        return replace(
            search,
            terms=counts.result().terms(),
            versions={id: source.version for id, source in sources.items()},
            levels={id: source.level for id, source in sources.items()},
        )

    return Pending(read)


def with_terms(conn: Connection, search: SearchQuery, *, versions: bool) -> SearchQuery:
    """``search`` with its terms and, for the HNSW statement (``versions``), the sources'
    current versions, read in one round trip."""
    with conn.pipeline():
        pending = pending_terms(conn, search, versions=versions)
    return pending.result()


def _pending_vector_search(
    conn: Connection, search: SearchQuery, backend: SearchBackend, pgvector: bool, ef_search: int
) -> Pending[list[Hit]]:
    """The vector search, sent (in a pipeline) and read later."""
    if backend is SearchBackend.PGVECTOR:
        return pending_hnsw_search(conn, search, ef_search=ef_search)
    return pending_exact_search(conn, search, pgvector=pgvector)


def _cutoff(scores: list[float], limit: int) -> float:
    """The lowest cosine a chunk needs to count as found by a vector search that returned
    ``scores``: its last hit's, or any above 0 when it returned fewer than ``limit`` (all it
    could)."""
    return min(scores) if len(scores) >= limit else 0.0


def merge(parts: Sequence[tuple[list[Hit], list[Hit], int]]) -> list[Candidate]:
    """Candidates from the hits of the searches of one step: per part, its text hits (best
    first) and its vector hits, both searches having been asked for ``limit`` hits.

    Text scores are ranks divided by the best rank of every part's text hits, so they compare
    across parts; whether a search found a chunk is judged against that part's own last hit.
    """
    top_rank = max((text[0].rank for text, _, _ in parts if text), default=None)
    candidates = []
    for text_hits, vector_hits, limit in parts:
        by_id = {hit.chunk_id: hit for hit in [*vector_hits, *text_hits]}  # a text hit wins
        text_cutoff = min((normalised(hit.rank, top_rank) for hit in text_hits), default=0.0)
        vector_cutoff = _cutoff(
            [vector_score(by_id[h.chunk_id].similarity) for h in vector_hits], limit
        )
        for hit in by_id.values():
            text_score = normalised(hit.rank, top_rank)
            vector = vector_score(hit.similarity)
            by_text = text_score > 0 and text_score >= text_cutoff
            by_vector = vector > 0 and vector >= vector_cutoff
            if by_text or by_vector:
                candidates.append(
                    Candidate(
                        chunk_id=hit.chunk_id,
                        source_id=hit.source_id,
                        index_version=hit.index_version,
                        text_score=text_score,
                        vector_score=vector,
                        found_by_text=by_text,
                        found_by_vector=by_vector,
                    )
                )
    # UUIDs hash and compare in Python code: each is looked up once and sorted by its integer.
    return sorted(candidates, key=lambda c: c.chunk_id.int)
