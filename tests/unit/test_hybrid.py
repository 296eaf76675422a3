"""Hybrid ranking: the spec's formula, the found-by-both tier, level weights, determinism."""

from __future__ import annotations

import itertools
import random
import uuid

import pytest

from context_ledger.search.candidates import Candidate
from context_ledger.search.hybrid import Ranked, found_by_both, hybrid_score, rank


def candidate(
    text: float = 0.0,
    vector: float = 0.0,
    *,
    by_text: bool | None = None,
    by_vector: bool | None = None,
    chunk_id: uuid.UUID | None = None,
    source_id: uuid.UUID | None = None,
) -> Candidate:
    return Candidate(
        chunk_id=chunk_id or uuid.uuid4(),
        source_id=source_id or uuid.uuid4(),
        index_version=1,
        text_score=text,
        vector_score=vector,
        found_by_text=text > 0 if by_text is None else by_text,
        found_by_vector=vector > 0 if by_vector is None else by_vector,
    )


def unweighted(_: Candidate) -> float:
    return 1.0


def test_the_score_is_seven_tenths_vector_plus_three_tenths_text_times_the_weight() -> None:
    assert hybrid_score(candidate(text=0.5, vector=0.8), 1.2) == pytest.approx(
        (0.7 * 0.8 + 0.3 * 0.5) * 1.2
    )
    assert hybrid_score(candidate(text=1.0, vector=1.0), 1.0) == pytest.approx(1.0)
    assert hybrid_score(candidate(), 1.4) == 0.0


def test_without_embeddings_the_score_is_three_tenths_of_text_times_the_weight() -> None:
    text_only = candidate(text=0.6)

    assert hybrid_score(text_only, 0.85) == pytest.approx(0.3 * 0.6 * 0.85)


def test_without_embeddings_the_order_is_the_text_order() -> None:
    texts = [0.2, 1.0, 0.55, 0.9]
    candidates = [candidate(text=t) for t in texts]

    ranked = rank(candidates, unweighted)

    assert [r.candidate.text_score for r in ranked] == sorted(texts, reverse=True)


def test_a_chunk_found_by_both_ranks_above_a_higher_scoring_chunk_found_by_one() -> None:
    # The formula alone would put the vector-only chunk first: .63 against .24.
    both = candidate(text=0.1, vector=0.3)
    vector_only = candidate(vector=0.9)
    text_only = candidate(text=1.0)

    ranked = rank([vector_only, text_only, both], unweighted)

    assert [r.candidate for r in ranked] == [both, vector_only, text_only]
    assert [r.score for r in ranked] == pytest.approx([0.24, 0.63, 0.3])


@pytest.mark.parametrize("seed", range(25))
def test_no_chunk_found_by_both_ever_follows_one_found_by_a_single_search(seed: int) -> None:
    rng = random.Random(seed)
    levels = [0.85, 0.92, 1.0, 1.2, 1.4]
    weights: dict[uuid.UUID, float] = {}
    candidates = []
    for _ in range(rng.randint(1, 60)):
        found = rng.choice([(True, True), (True, False), (False, True)])
        c = candidate(
            text=rng.random() if found[0] or rng.random() < 0.3 else 0.0,
            vector=rng.random() if found[1] or rng.random() < 0.8 else 0.0,
            by_text=found[0],
            by_vector=found[1],
        )
        weights[c.chunk_id] = rng.choice(levels)
        candidates.append(c)

    ranked = rank(candidates, lambda c: weights[c.chunk_id])

    tiers = [found_by_both(r.candidate) for r in ranked]
    assert tiers == sorted(tiers, reverse=True), "found-by-both first, then the rest"
    for previous, current in itertools.pairwise(ranked):
        if found_by_both(previous.candidate) == found_by_both(current.candidate):
            assert previous.score >= current.score
    assert sorted(r.candidate.chunk_id for r in ranked) == sorted(c.chunk_id for c in candidates)


def test_level_weights_change_the_order() -> None:
    team, project = uuid.uuid4(), uuid.uuid4()
    in_team = candidate(text=0.8, vector=0.6, source_id=team)
    in_project = candidate(text=0.7, vector=0.55, source_id=project)

    same = rank([in_team, in_project], unweighted)
    weighted = rank([in_team, in_project], lambda c: 1.2 if c.source_id == project else 1.0)

    assert [r.candidate for r in same] == [in_team, in_project]
    assert [r.candidate for r in weighted] == [in_project, in_team]
    assert weighted[0].score == pytest.approx((0.7 * 0.55 + 0.3 * 0.7) * 1.2)


def test_the_ranking_is_deterministic_and_breaks_ties_by_chunk_id() -> None:
    ids = sorted(uuid.uuid4() for _ in range(8))
    tied = [candidate(text=0.5, vector=0.5, chunk_id=i) for i in ids]
    others = [candidate(text=text) for text in (0.1, 0.9)]
    candidates = tied + others

    orders = set()
    for seed in range(10):
        shuffled = candidates[:]
        random.Random(seed).shuffle(shuffled)
        orders.add(tuple(r.candidate.chunk_id for r in rank(shuffled, unweighted)))

    assert len(orders) == 1
    assert list(orders.pop())[: len(ids)] == ids


def test_ranked_carries_the_candidate_and_its_weighted_score() -> None:
    c = candidate(text=1.0, vector=0.5)

    assert rank([c], lambda _: 0.92) == [Ranked(c, pytest.approx((0.35 + 0.3) * 0.92))]
