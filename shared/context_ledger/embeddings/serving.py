"""The providers the embeddings endpoint can serve, chosen by ``KEYSTONE_EMBEDDINGS_PROVIDER``.

- ``hashing``: :class:`~context_ledger.embeddings.hashing.HashingEmbeddingProvider`, any
  ``dimensions`` a request asks for (default ``KEYSTONE_EMBEDDINGS_HASHING_DIMENSIONS``), usage
  counted in whitespace-separated words. No model, no numpy.
- ``minilm``: all-MiniLM-L6-v2 (``embeddings/minilm.py``), 384 dimensions only, usage counted in
  the model's own tokens. Its module (numpy, tokenizers, the weights) is imported only here and
  only for this provider, so everything else runs without those packages.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.embeddings.wire import Embedded, EmbeddingsService, InputError
from context_ledger.settings import EmbeddingsProvider, Settings, get_settings

if TYPE_CHECKING:
    from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider

#: Upper bound on a hashing request's ``dimensions``: each one costs memory for every vector.
MAX_HASHING_DIMENSIONS = 16000


class HashingService:
    """The hashing provider at whatever dimensions a request names."""

    def __init__(self, default_dimensions: int) -> None:
        self.default_dimensions = default_dimensions

    def embed(self, texts: Sequence[str], dimensions: int | None) -> Embedded:
        dimensions = self.default_dimensions if dimensions is None else dimensions
        if dimensions > MAX_HASHING_DIMENSIONS:
            raise InputError(
                f"'dimensions' must be at most {MAX_HASHING_DIMENSIONS}.", "dimensions"
            )
        vectors = HashingEmbeddingProvider(dimensions).embed(texts)
        return Embedded(vectors, sum(len(text.split()) for text in texts))


class MiniLMService:
    """all-MiniLM-L6-v2, whose vectors have 384 dimensions and no other size."""

    def __init__(self, provider: MiniLMEmbeddingProvider) -> None:
        self.provider = provider

    def embed(self, texts: Sequence[str], dimensions: int | None) -> Embedded:
        if dimensions not in (None, self.provider.dimensions):
            raise InputError(
                f"This model answers {self.provider.dimensions} dimensions only.", "dimensions"
            )
        vectors, tokens = self.provider.encode(texts)
        return Embedded(vectors.tolist(), tokens)


def service_from_settings(settings: Settings) -> EmbeddingsService:
    """The configured provider, loaded (the model's weights are read here, once)."""
    if settings.embeddings_provider is EmbeddingsProvider.MINILM:
        from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider

        return MiniLMService(MiniLMEmbeddingProvider(settings.embeddings_model_dir))
    return HashingService(settings.embeddings_hashing_dimensions)


@functools.cache
def get_embeddings_service() -> EmbeddingsService:
    """The process-wide service: a warm function keeps its model in memory."""
    return service_from_settings(get_settings())
