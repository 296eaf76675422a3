"""The sentences of a retrieve answer's ``warnings``: why the answer is less than it could be.

An empty answer must not leave the caller guessing between "nothing matched" and "nothing was
searched". Each sentence speaks of the spaces the caller may search only, and names them by
level, never by name: a space of the chain the caller may not search is neither named nor
counted, so a warning tells nothing that a ``404`` elsewhere hides.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from context_ledger.retrieval.chain import SearchSource
from context_ledger.sources.model import SourceKind
from context_ledger.spaces.levels import Level

#: What a retrieval without ``spaceId`` searches (spec: "the organisation-level chain").
_ORGANISATION_CHAIN = (
    "without spaceId a retrieval searches the organisation space and your personal space only"
)


def _listed(words: Iterable[str]) -> str:
    items = list(words)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def nothing_searchable() -> str:
    """Without ``spaceId``, the caller may search none of the chain's spaces: a service (it has
    no personal space) without a grant on the organisation space. (With a ``spaceId`` the start
    space is one the caller may search, or the answer is a 404.)"""
    return (
        f"no space was searched: {_ORGANISATION_CHAIN}, and you may search neither; pass the "
        "spaceId of a space you hold context:space:search on to search it and the spaces above it"
    )


def no_source(
    levels: Sequence[Level], kinds: frozenset[SourceKind] | None, *, space_given: bool
) -> str:
    """The spaces searched hold no published source (of the kinds asked)."""
    of_kinds = f" of the kinds asked ({_listed(sorted(kinds))})" if kinds else ""
    searched = f"the spaces searched ({_listed(levels)}) hold no published source{of_kinds}"
    if space_given:
        return f"no source was searched: {searched}"
    return (
        f"no source was searched: {searched}; {_ORGANISATION_CHAIN}: pass spaceId to search a "
        "team's or project's space and the spaces above it"
    )


def withheld(sources: Sequence[SearchSource]) -> str:
    """Sources of the searched spaces the organisation's DLP policy withholds from everyone."""
    classes = ", ".join(sorted({s.classification for s in sources}))
    return (
        f"{len(sources)} source(s) in the searched spaces are withheld from every caller by "
        f"the organisation's DLP policy ({classes}); nothing of them was searched"
    )


def budget_too_small(budget: int, smallest: int) -> str:
    """Chunks were found, and the smallest of them does not fit the whole budget."""
    return (
        f"tokenBudget {budget} is smaller than every chunk found (the smallest takes {smallest} "
        "tokens); nothing was delivered: raise tokenBudget"
    )


def no_terms() -> str:
    """A full-text-only search of a query without a term: nothing could match it."""
    return (
        'the query has no word full-text search can match (stop words such as "what" or '
        '"the", punctuation and fragments such as "I\'m" or "e.g." are left out), and no '
        "embeddings endpoint searched it by meaning: ask with the words of what you need"
    )
