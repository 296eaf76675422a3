"""/relevant scoring (spec): ``0.40·similarity + 0.20·recency + 0.25·importance + 0.15·frequency``.

Definitions the spec leaves to us (docs/decisions.md, "Memory recency and frequency"):

- **recency** halves every :data:`RECENCY_HALF_LIFE_DAYS` days since the memory's last write
  (``updated_at``: creation or the last accepted change): ``0.5 ** (age_days / 30)``, so a fresh
  memory has 1.0. Reading never moves ``updated_at``, so reading never changes recency.
- **frequency** saturates with explicit accesses: ``n / (n + FREQUENCY_HALF_COUNT)``, 0.0 for a
  memory never accessed, 0.5 after 10 accesses, approaching 1.
- **similarity** is the cosine of the query and memory vectors, clamped to [0, 1]; 1.0 for an empty
  query, 0.0 for incompatible vectors (another provider or dimension, or no vector).

Every function takes numbers or numpy arrays alike: /relevant scores all its candidates (up to
``VENKAI_RETRIEVAL_MAX_CANDIDATES``) in a few array operations. Ranking is by score (unrounded),
then the newer memory, then the smaller id: deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

W_SIMILARITY = 0.40
W_RECENCY = 0.20
W_IMPORTANCE = 0.25
W_FREQUENCY = 0.15
RECENCY_HALF_LIFE_DAYS = 30.0
FREQUENCY_HALF_COUNT = 10
SECONDS_PER_DAY = 86_400.0

Number = TypeVar("Number", float, np.ndarray)


def recency(age_seconds: Number) -> Number:
    """1.0 when just written, halving every RECENCY_HALF_LIFE_DAYS; a negative age is fresh."""
    days = np.maximum(age_seconds, 0.0) / SECONDS_PER_DAY
    return 0.5 ** (days / RECENCY_HALF_LIFE_DAYS)


def frequency(access_count: Number) -> Number:
    """0.0 for never accessed, 0.5 at FREQUENCY_HALF_COUNT accesses, approaching 1.0."""
    count = np.maximum(access_count, 0)
    return count / (count + FREQUENCY_HALF_COUNT)


def score(*, similarity: Number, recency: Number, importance: Number, frequency: Number) -> Number:
    return (
        W_SIMILARITY * similarity
        + W_RECENCY * recency
        + W_IMPORTANCE * importance
        + W_FREQUENCY * frequency
    )


def unit(vector: Sequence[float]) -> np.ndarray:
    """``vector`` scaled to length 1 (float64; the zero vector stays zero), so that cosine is a
    dot product."""
    array = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(array))
    return array / norm if norm else array


def similarities(query: np.ndarray, vectors: np.ndarray, compatible: np.ndarray) -> np.ndarray:
    """Cosine of the unit ``query`` with each row of unit ``vectors``, clamped to [0, 1]; 0.0
    where ``compatible`` is false (those rows' values are ignored).

    ``einsum`` rather than ``@``: a matrix-vector product this small is faster without BLAS,
    whose threads only contend for the one or two cores a function has.
    """
    if not len(vectors):
        return np.zeros(len(compatible))
    dots = np.einsum("ij,j->i", vectors, query.astype(vectors.dtype))
    return np.where(compatible, np.clip(dots, 0.0, 1.0), 0.0).astype(np.float64)


def ranking(scores: np.ndarray, created_at: np.ndarray, id_numbers: np.ndarray) -> np.ndarray:
    """Indices from the best to the worst: highest score, then newest, then smallest id (ids
    given as numbers that order like them)."""
    return np.lexsort((id_numbers, -created_at, -scores))
