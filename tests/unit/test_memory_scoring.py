"""/relevant scoring: the spec's formula, the documented recency and frequency, the order."""

from __future__ import annotations

import numpy as np
import pytest

from context_ledger.memory import scoring

DAY = 86_400.0


def test_the_spec_example_is_reproduced_for_fresh_never_accessed_memories() -> None:
    # GIVEN the spec's two memories, just written, never accessed, with its similarities
    scores = scoring.score(
        similarity=np.array([0.1348, 0.0]),
        recency=scoring.recency(np.array([0.0, 0.0])),
        importance=np.array([0.9, 0.8]),
        frequency=scoring.frequency(np.array([0, 0])),
    )

    assert np.round(scores, 4).tolist() == [0.4789, 0.4]


def test_recency_halves_every_thirty_days() -> None:
    ages = np.array([0.0, 30 * DAY, 90 * DAY])

    assert scoring.recency(ages) == pytest.approx([1.0, 0.5, 0.125])


def test_a_timestamp_in_the_future_counts_as_fresh() -> None:
    assert scoring.recency(-300.0) == 1.0


def test_frequency_is_zero_without_accesses_and_half_at_ten() -> None:
    assert scoring.frequency(np.array([0, 10])).tolist() == [0.0, 0.5]
    assert 0.9 < scoring.frequency(1000) < 1.0


def test_scores_stay_within_zero_and_one() -> None:
    assert scoring.score(similarity=0, recency=0, importance=0, frequency=0) == 0.0
    assert scoring.score(similarity=1, recency=1, importance=1, frequency=1) == pytest.approx(1.0)


def test_similarity_of_unit_vectors_is_their_dot_product_clamped_to_zero_and_one() -> None:
    query = scoring.unit([3.0, 4.0])
    vectors = np.array([scoring.unit([4.0, 3.0]), -query, query])

    found = scoring.similarities(query, vectors, np.array([True, True, True]))

    assert found == pytest.approx([24 / 25, 0.0, 1.0])


def test_incompatible_vectors_have_similarity_zero() -> None:
    query = scoring.unit([1.0, 0.0])
    vectors = np.array([[1.0, 0.0], [0.0, 0.0]])

    found = scoring.similarities(query, vectors, np.array([False, False]))

    assert found.tolist() == [0.0, 0.0]


def test_the_zero_vector_stays_zero() -> None:
    assert scoring.unit([0.0, 0.0]).tolist() == [0.0, 0.0]


def test_ties_rank_the_newer_memory_first_then_the_smaller_id() -> None:
    ids = ["ctx_000000000003", "ctx_000000000002", "ctx_000000000001", "ctx_000000000004"]
    created = np.array([100.0, 200.0, 200.0, 100.0])
    scores = np.array([0.5, 0.5, 0.5, 0.9])

    order = scoring.ranking(scores, created, np.array([int(i[4:], 16) for i in ids]))

    assert [ids[i] for i in order] == [
        "ctx_000000000004",
        "ctx_000000000001",
        "ctx_000000000002",
        "ctx_000000000003",
    ]
