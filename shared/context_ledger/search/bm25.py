"""BM25 term weights and the choice of matched terms (pure: no I/O).

``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``, Lucene's form of the Robertson-Spärck Jones
weight: never negative, so a term in most chunks still counts a little instead of pushing the
chunks holding it down. ``N`` and ``df`` are counted over the searched index versions.

A term's weight is its idf times the number of times the query holds it (query-term frequency):
BM25 sums over the query's terms with their repeats, as Lucene and bm25s do. A pasted issue or
paragraph says what matters by repeating it; counting each term once cost about .05 nDCG@10 on
verbose queries (bm25s on CACM: .447 against .494; docs/decisions.md) and nothing
on short ones.

``k1`` and ``b`` are the usual defaults; ``b`` applies to the chunk's length in tokens, as in
Lucene and bm25s (``chunks.tsv_tokens``). Its number of distinct lexemes, which PostgreSQL's
tsvector header gives for free, ranks a chunk that repeats its words as if it were short: .477
against .489 nDCG@10 on CACM, exhaustive (docs/decisions.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

K1 = 1.2
B = 0.75

#: The text search matches the query's rarest terms until their document frequencies add up to
#: this many chunks (search/fulltext.py: "Matching").
MATCH_POSTINGS = 1000

#: The same bound when the query has a vector too (hybrid search): the vector search finds what
#: the narrower text match leaves out, and every candidate's BM25 rank is filled in over all
#: terms anyway. On MiniLM vectors, nDCG@10 does not move from 1,000 down to 50 postings (100k
#: SciFact passages, SciFact, CoSQA; docs/decisions.md) while the text statement gets 3x faster.
HYBRID_MATCH_POSTINGS = 250


@dataclass(frozen=True)
class TermStats:
    lexeme: str
    operand: str  # the lexeme quoted as a tsquery operand
    chunks: int  # document frequency in the searched versions
    repeats: int = 1  # how many times the query holds it


@dataclass(frozen=True)
class QueryTerms:
    lexemes: tuple[str, ...]
    weights: tuple[float, ...]
    match: tuple[str, ...]  # within MATCH_POSTINGS
    hybrid_match: tuple[str, ...]  # within HYBRID_MATCH_POSTINGS
    average_length: float


def idf(document_frequency: int, chunks: int) -> float:
    return math.log(1 + (chunks - document_frequency + 0.5) / (document_frequency + 0.5))


def matched(terms: Sequence[TermStats], postings: int | None = None) -> list[TermStats]:
    """The rarest terms, in order of document frequency, while their chunks add up to at most
    ``postings`` (default :data:`MATCH_POSTINGS`): always the rarest one, even above it."""
    limit = MATCH_POSTINGS if postings is None else postings
    chosen: list[TermStats] = []
    total = 0
    for term in sorted(terms, key=lambda t: (t.chunks, t.lexeme)):
        if chosen and total + term.chunks > limit:
            break
        chosen.append(term)
        total += term.chunks
    return chosen


def query_terms(
    terms: Sequence[TermStats],
    *,
    chunks: int,
    tokens: int,
    matched_in: Sequence[TermStats] | None = None,
) -> QueryTerms:
    """Weights of the query's terms found in the searched versions (``chunks`` chunks of
    ``tokens`` tokens in all), and the operands the text search matches, alone and in
    a hybrid search.

    ``matched_in``: the terms' document frequencies in the part of the searched versions one
    search covers (a level of the chain, search/candidates.py), when it covers only a part. The
    weights stay those of the whole, so ranks compare across parts; the matched terms are that
    part's rarest, so every part finds its own best chunks.
    """
    present = [t for t in terms if t.chunks > 0]
    if not present or chunks < 1:
        return QueryTerms((), (), (), (), 1.0)
    local = present if matched_in is None else [t for t in matched_in if t.chunks > 0]
    return QueryTerms(
        lexemes=tuple(t.lexeme for t in present),
        weights=tuple(t.repeats * idf(t.chunks, chunks) for t in present),
        match=tuple(t.operand for t in matched(local)) if local else (),
        hybrid_match=tuple(t.operand for t in matched(local, HYBRID_MATCH_POSTINGS))
        if local
        else (),
        average_length=max(tokens / chunks, 1.0),
    )
