"""Fit ranked chunks into a token budget."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def fit_to_budget(
    items: Iterable[T], budget: int, tokens_of: Callable[[T], int]
) -> tuple[list[T], int]:
    """Take items in order while they fit; an item that does not fit is skipped and the next,
    possibly smaller, one is tried. Returns the items taken and the tokens they use."""
    taken: list[T] = []
    used = 0
    for item in items:
        tokens = tokens_of(item)
        if used + tokens <= budget:
            taken.append(item)
            used += tokens
    return taken, used
