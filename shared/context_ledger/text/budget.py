"""Fit ranked chunks into a token budget."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


def fit_to_budget(
    items: Iterable[T],
    budget: int,
    tokens_of: Callable[[T], int],
    *,
    digest_of: Callable[[T], bytes] | None = None,
    delivered: set[bytes] | None = None,
) -> tuple[list[T], int]:
    """Take items in order while they fit; an item that does not fit is skipped and the next,
    possibly smaller, one is tried. Returns the items taken and the tokens they use.

    With ``digest_of``, an item whose digest equals one taken before (in this call, or listed in
    ``delivered``) is skipped without spending anything: the same text is delivered once. The
    digests of the items taken are added to ``delivered``, so a second call (related code after
    the ranked chunks) skips the texts of the first."""
    taken: list[T] = []
    used = 0
    seen = delivered if delivered is not None else set()
    for item in items:
        digest = digest_of(item) if digest_of is not None else None
        if digest is not None and digest in seen:
            continue
        tokens = tokens_of(item)
        if used + tokens <= budget:
            taken.append(item)
            used += tokens
            if digest is not None:
                seen.add(digest)
    return taken, used
