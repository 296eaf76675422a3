"""The hashing provider: deterministic, normalised, and closer for texts that share words."""

from __future__ import annotations

import math

import pytest

from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.embeddings.similarity import cosine


def _norm(vector: list[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in vector))


def test_the_default_has_128_dimensions_and_unit_length() -> None:
    [vector] = HashingEmbeddingProvider().embed(["We use Postgres, not MongoDB."])

    assert len(vector) == 128
    assert _norm(vector) == pytest.approx(1.0, abs=1e-12)


def test_dimensions_are_configurable() -> None:
    assert len(HashingEmbeddingProvider(384).embed_text("refunds")) == 384


def test_vectors_are_pinned_so_stored_embeddings_stay_comparable_across_releases() -> None:
    # A change here changes every stored vector: rename the provider instead.
    vector = HashingEmbeddingProvider(16).embed_text("Refunds authorised")

    a, b = 0.229416, 0.458831
    assert [round(x, 6) for x in vector] == [0, -a, 0, b, 0, a, -a, 0, -a, 0, -a, 0, a, a, b, b]


def test_case_and_punctuation_do_not_matter() -> None:
    provider = HashingEmbeddingProvider()

    assert provider.embed_text("Refunds, authorised!") == provider.embed_text("refunds authorised")


def test_texts_sharing_words_score_higher_than_unrelated_texts() -> None:
    provider = HashingEmbeddingProvider()
    query, related, unrelated = provider.embed(
        [
            "how are refunds authorised",
            "Refunds are authorised by the payments team lead.",
            "The retrieval endpoint must answer in under 200 ms at p95.",
        ]
    )

    assert cosine(query, related) > cosine(query, unrelated) + 0.2


def test_word_variants_meet_through_trigrams() -> None:
    provider = HashingEmbeddingProvider()

    assert cosine(provider.embed_text("refund"), provider.embed_text("refunds")) > 0.5


def test_a_text_without_words_is_the_zero_vector_with_cosine_zero() -> None:
    provider = HashingEmbeddingProvider()
    empty = provider.embed_text(" ... ")

    assert empty == [0.0] * 128
    assert cosine(empty, provider.embed_text("refunds")) == 0.0


def test_cosine_of_incompatible_vectors_is_zero() -> None:
    assert cosine([1.0, 0.0], [1.0, 0.0, 0.0]) == 0.0
    assert cosine([], []) == 0.0
