"""A deterministic, dependency-free embedder: signed feature hashing of words and trigrams.

``HashingEmbeddingProvider`` is the floor every real model is evaluated against, the memory API's
embedder (its justifications read ``HashingEmbeddingProvider, 128d``), and what the stand-in
embeddings server answers with.

Features, from the lower-cased text (Unicode word characters, so ``refund_id`` stays one word):

- each word, weight 1.0, so texts that share words score higher;
- each character trigram of ``^word$``, weight 0.5, so ``refund`` and ``refunds`` still meet.

A feature's bucket and sign come from BLAKE2b of ``kind:feature``, stable across processes and
Python versions (unlike ``hash()``), so stored vectors stay comparable after a restart. Signed
hashing keeps collisions from adding up to a bias. The vector is L2-normalised; a text with no
word characters gets the zero vector, whose cosine with anything is 0.

Changing any of this changes every stored vector: give the result a new name.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Sequence

DEFAULT_DIMENSIONS = 128
WORD_WEIGHT = 1.0
TRIGRAM_WEIGHT = 0.5
_WORD = re.compile(r"\w+")


@functools.lru_cache(maxsize=65536)
def _bucket(feature: str, dimensions: int) -> tuple[int, float]:
    value = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
    return value % dimensions, (1.0 if value >> 63 else -1.0)


class HashingEmbeddingProvider:
    """Embeds texts by signed feature hashing into ``dimensions`` buckets (default 128)."""

    name = "HashingEmbeddingProvider"

    def __init__(self, dimensions: int = DEFAULT_DIMENSIONS) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be at least 1")
        self.dimensions = dimensions

    def __repr__(self) -> str:
        return f"{self.name}({self.dimensions})"

    def embed(self, texts: Sequence[str], *, within: float | None = None) -> list[list[float]]:
        """``within``, the caller's deadline, is met by construction: nothing here waits."""
        return [self.embed_text(text) for text in texts]

    def embed_text(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in _WORD.findall(text.lower()):
            self._add(vector, f"w:{word}", WORD_WEIGHT)
            marked = f"^{word}$"
            for start in range(len(marked) - 2):
                self._add(vector, f"t:{marked[start : start + 3]}", TRIGRAM_WEIGHT)
        norm = math.sqrt(math.fsum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector

    def _add(self, vector: list[float], feature: str, weight: float) -> None:
        index, sign = _bucket(feature, self.dimensions)
        vector[index] += sign * weight
