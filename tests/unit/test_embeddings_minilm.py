"""all-MiniLM-L6-v2 in numpy: the packaged weights load, and the vectors are the model's.

The reference values below were computed with sentence-transformers on CPU torch from the same
weights; bench/embeddings.py compares the two runtimes on hundreds of texts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from context_ledger.embeddings.minilm import (
    DIMENSIONS,
    MAX_SEQ_LENGTH,
    MiniLMEmbeddingProvider,
    ModelFilesError,
)
from context_ledger.embeddings.serving import MiniLMService
from context_ledger.embeddings.wire import InputError

REFERENCE = (
    Path(__file__).resolve().parents[1] / "fixtures" / "embeddings" / "minilm_reference.json"
)
QUERY = "how are refunds authorised"


@pytest.fixture(scope="module")
def provider() -> MiniLMEmbeddingProvider:
    return MiniLMEmbeddingProvider()


def test_vectors_match_sentence_transformers_reference_values(
    provider: MiniLMEmbeddingProvider,
) -> None:
    vectors, tokens = provider.encode([QUERY])

    reference = [-0.0763, 0.0303, 0.0325, -0.0293, 0.0246, 0.0481, 0.0318, -0.065]
    assert vectors[0, :8].tolist() == pytest.approx(reference, abs=1e-4)
    assert tokens == 7  # [CLS] how are ref ##unds authorised [SEP]


def test_vectors_have_384_dimensions_and_unit_length(provider: MiniLMEmbeddingProvider) -> None:
    vectors, _ = provider.encode(["Refunds need the team lead's approval.", "x"])

    assert vectors.shape == (2, DIMENSIONS)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-6)


def test_known_similar_sentences_score_higher_than_unrelated_ones(
    provider: MiniLMEmbeddingProvider,
) -> None:
    query, paraphrase, related, unrelated = provider.encode(
        [
            QUERY,
            "Who approves giving customers their money back?",
            "Refunds are authorised by the payments team lead.",
            "The cat slept on the warm windowsill all afternoon.",
        ]
    )[0]

    # No shared word with the query, yet closer than a sentence about something else.
    assert query @ paraphrase > query @ unrelated + 0.2
    assert query @ related > query @ unrelated + 0.3


def test_a_text_embeds_the_same_alone_and_padded_in_a_batch(
    provider: MiniLMEmbeddingProvider,
) -> None:
    long_text = "Chargebacks are disputed through the acquiring bank within 30 days. " * 8

    alone = provider.encode([QUERY])[0][0]
    batched = provider.encode([long_text, QUERY, "x"])[0][1]

    assert float(alone @ batched) == pytest.approx(1.0, abs=1e-6)
    assert provider.embed([QUERY]) == provider.embed([QUERY])


def test_texts_are_truncated_at_the_models_window(provider: MiniLMEmbeddingProvider) -> None:
    words = " ".join(f"word{i}" for i in range(1000))

    _, tokens = provider.encode([words])

    assert tokens == MAX_SEQ_LENGTH


def test_the_service_serves_384_dimensions_only(provider: MiniLMEmbeddingProvider) -> None:
    service = MiniLMService(provider)

    assert len(service.embed([QUERY], 384).vectors[0]) == DIMENSIONS
    with pytest.raises(InputError) as refused:
        service.embed([QUERY], 128)
    assert refused.value.param == "dimensions"


def test_a_folder_without_the_weights_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")

    with pytest.raises(ModelFilesError, match=r"tokenizer\.json is missing"):
        MiniLMEmbeddingProvider(tmp_path)


def test_vectors_match_sentence_transformers(provider: MiniLMEmbeddingProvider) -> None:
    """Against vectors sentence-transformers computed from the same weights (stored, so the suite
    needs no torch; ``bench/make_minilm_reference.py`` writes them)."""
    reference = json.loads(REFERENCE.read_text())
    expected = np.array(reference["vectors"])

    vectors = provider.encode(reference["texts"])[0]

    assert vectors.shape == expected.shape
    assert (vectors * expected).sum(axis=1).min() > 0.9999
    assert np.abs(vectors - expected).max() < 1e-4
