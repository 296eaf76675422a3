"""Cosine similarity in Python, for vectors already in memory (memory API, tests, evaluations)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of ``a`` and ``b``; 0.0 when they are incompatible (lengths differ) or one is zero."""
    if len(a) != len(b) or not a:
        return 0.0
    norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return math.fsum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0
