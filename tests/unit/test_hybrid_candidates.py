"""The inputs of the hybrid score: how two searches' hits become candidates (no database)."""

from __future__ import annotations

import uuid

import pytest

from context_ledger.search.candidates import merge, vector_score
from context_ledger.search.fulltext import normalised
from context_ledger.search.query import Hit

SOURCE = uuid.uuid4()


def hit(rank: float | None, similarity: float | None, chunk_id: uuid.UUID | None = None) -> Hit:
    return Hit(chunk_id or uuid.uuid4(), SOURCE, 3, rank, similarity)


@pytest.mark.parametrize(
    ("similarity", "score"),
    [(0.42, 0.42), (1.0000002, 1.0), (-0.3, 0.0), (None, 0.0), (float("nan"), 0.0)],
)
def test_the_vector_score_is_the_cosine_clamped_to_0_and_1(similarity, score) -> None:
    assert vector_score(similarity) == score


def test_text_scores_are_divided_by_the_top_rank() -> None:
    assert normalised(0.05, 0.2) == pytest.approx(0.25)
    assert normalised(0.2, 0.2) == 1.0
    assert normalised(None, 0.2) == 0.0
    assert normalised(0.1, None) == 0.0


def test_a_rank_above_the_top_text_hits_is_capped_at_1() -> None:
    # A vector-only hit holding many common query terms but none of the matched rare ones.
    assert normalised(7.5, 5.0) == 1.0


def test_each_candidate_has_both_scores_whichever_search_found_it() -> None:
    text_top, both, vector_only = hit(0.4, 0.1), hit(0.1, 0.8), hit(None, 0.6)

    found = merge([([text_top, both], [both, vector_only], 2)])

    assert {
        c.chunk_id: (c.text_score, c.vector_score, c.found_by_text, c.found_by_vector)
        for c in found
    } == {
        text_top.chunk_id: (1.0, 0.1, True, False),
        both.chunk_id: (0.25, 0.8, True, True),
        vector_only.chunk_id: (0.0, 0.6, False, True),
    }
    assert [c.chunk_id for c in found] == sorted(c.chunk_id for c in found)


def test_a_vector_hit_at_or_below_zero_cosine_is_not_a_candidate() -> None:
    orthogonal, opposite, zero_vector = hit(None, 0.0), hit(None, -0.2), hit(None, None)

    assert merge([([], [orthogonal, opposite, zero_vector], 10)]) == []


def test_a_text_hit_the_approximate_scan_missed_counts_as_found_by_vector() -> None:
    # The vector search returned its `limit` (2) hits; the text hit's cosine beats the last one.
    missed = hit(0.3, 0.7)
    first, last = hit(None, 0.9), hit(None, 0.5)
    weak = hit(0.2, 0.4)

    found = {c.chunk_id: c for c in merge([([missed, weak], [first, last], 2)])}

    assert found[missed.chunk_id].found_by_vector
    assert not found[weak.chunk_id].found_by_vector
    assert found[weak.chunk_id].found_by_text


def test_a_search_that_returned_fewer_than_limit_found_every_positive_score() -> None:
    text_hit = hit(0.3, 0.05)

    [_, under_limit] = sorted(
        merge([([text_hit], [hit(None, 0.9)], 100)]), key=lambda c: c.vector_score, reverse=True
    )
    [_, at_limit] = sorted(
        merge([([text_hit], [hit(None, 0.9)], 1)]), key=lambda c: c.vector_score, reverse=True
    )

    assert under_limit.found_by_vector
    assert not at_limit.found_by_vector
