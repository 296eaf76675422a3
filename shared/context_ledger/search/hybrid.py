"""Hybrid ranking of the search step's candidates (pure: no I/O).

Score, the spec's formula exactly: ``(0.7 * vector + 0.3 * text) * weight``, with both scores in
[0, 1] (search/candidates.py) and ``weight`` the level weight of the chunk's space. Without an
embeddings endpoint every vector score is 0, so scores are ``0.3 * text * weight``: the order is
the text order, and scores stay comparable with those of a search that had vectors.

Order. The spec also says a chunk found by both searches never ranks below one found by either
alone, which the formula cannot promise (both with vector .3 and text .1 scores .24; vector-only
with .9 scores .63). So candidates are ranked in two tiers: found by both first, then the rest,
each tier by score, highest first, ties broken by chunk id so equal inputs give equal output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple

from context_ledger.search.candidates import Candidate

VECTOR_WEIGHT = 0.7
TEXT_WEIGHT = 0.3


class Ranked(NamedTuple):
    candidate: Candidate
    score: float


def hybrid_score(candidate: Candidate, weight: float) -> float:
    return (VECTOR_WEIGHT * candidate.vector_score + TEXT_WEIGHT * candidate.text_score) * weight


def found_by_both(candidate: Candidate) -> bool:
    return candidate.found_by_text and candidate.found_by_vector


def rank(candidates: Iterable[Candidate], weight_of: Callable[[Candidate], float]) -> list[Ranked]:
    """Candidates scored with their weight and ordered: found by both first, then by score."""
    scored = [Ranked(c, hybrid_score(c, weight_of(c))) for c in candidates]
    return sorted(
        scored,
        key=lambda r: (not found_by_both(r.candidate), -r.score, r.candidate.chunk_id),
    )
