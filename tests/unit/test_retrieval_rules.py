"""Pure rules of retrieval: request defaults and limits, budget, related-code picking, cache."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from context_ledger.attribution.publisher import parse_client_header
from context_ledger.errors import SpaceNotFoundError
from context_ledger.http.retrieve import RetrieveRequest
from context_ledger.retrieval.cache import CachedSearch, SearchCache
from context_ledger.retrieval.query import RetrieveQuery
from context_ledger.retrieval.related import pick_related
from context_ledger.text.budget import fit_to_budget


def request(**fields) -> RetrieveQuery:
    return RetrieveRequest.model_validate({"query": "refunds", **fields}).to_query()


def test_defaults_are_the_specs() -> None:
    parsed = request()

    assert (parsed.token_budget, parsed.max_per_level) == (4096, 5)
    assert parsed.exclude_related is False
    assert parsed.kinds() is None
    assert parsed.space_uuid() is None


def test_a_token_budget_above_32000_is_lowered() -> None:
    assert request(tokenBudget=50_000).token_budget == 32_000


def test_a_negative_token_budget_is_refused() -> None:
    with pytest.raises(ValidationError):
        request(tokenBudget=-1)


def test_max_per_level_above_50_is_lowered() -> None:
    assert request(maxPerLevel=500).max_per_level == 50


def test_an_unknown_source_kind_is_refused() -> None:
    with pytest.raises(ValidationError):
        request(sourceKinds=["codebase", "wiki"])


def test_source_kinds_restrict_the_search() -> None:
    assert request(sourceKinds=["codebase", "issues"]).kinds() == {"codebase", "issues"}


def test_an_empty_space_id_means_the_organisation_chain() -> None:
    assert request(spaceId="", lensId="", sessionId="").space_uuid() is None


def test_a_space_id_that_is_not_a_uuid_is_an_unknown_space() -> None:
    with pytest.raises(SpaceNotFoundError):
        request(spaceId="billing").space_uuid()


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_is_refused(query: str) -> None:
    with pytest.raises(ValidationError):
        request(query=query)


def test_a_chunk_that_does_not_fit_is_skipped_and_smaller_ones_still_come() -> None:
    taken, used = fit_to_budget([300, 900, 200, 100], 600, lambda tokens: tokens)

    assert taken == [300, 200, 100]
    assert used == 600


def test_a_zero_budget_delivers_nothing() -> None:
    assert fit_to_budget([1, 2], 0, lambda t: t) == ([], 0)


def test_a_text_delivered_already_is_skipped_and_spends_nothing() -> None:
    """(digest, tokens): the second b is the first b's text again."""
    items = [(b"a", 300), (b"b", 200), (b"b", 200), (b"c", 300)]

    taken, used = fit_to_budget(
        items, 800, lambda item: item[1], digest_of=lambda item: item[0], delivered=set()
    )

    assert taken == [(b"a", 300), (b"b", 200), (b"c", 300)]
    assert used == 800


def test_a_text_skipped_for_the_budget_is_not_marked_delivered() -> None:
    delivered: set[bytes] = set()

    taken, used = fit_to_budget(
        [(b"a", 500), (b"x", 100)],
        400,
        lambda i: i[1],
        digest_of=lambda i: i[0],
        delivered=delivered,
    )

    assert (taken, used, delivered) == ([(b"x", 100)], 100, {b"x"})


def test_the_texts_of_a_first_call_are_skipped_by_the_next() -> None:
    """Related code after the ranked chunks: a related chunk with a ranked chunk's text."""
    delivered: set[bytes] = set()
    fit_to_budget([(b"a", 10)], 100, lambda i: i[1], digest_of=lambda i: i[0], delivered=delivered)

    taken, used = fit_to_budget(
        [(b"a", 10), (b"r", 10)], 90, lambda i: i[1], digest_of=lambda i: i[0], delivered=delivered
    )

    assert (taken, used) == ([(b"r", 10)], 10)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("neuralinverse-editor/1.4.2", ("neuralinverse-editor", "1.4.2")),
        ("cli/2.0.0-beta+3", ("cli", "2.0.0-beta+3")),
        ("no-version", None),
        ("a/b/c", None),
        ("name/ver sion", None),
        ("", None),
        (None, None),
        ("x" * 70 + "/1", None),
        ("AKIAQ3EGRTW5NB7XKP2M/1.0", None),
        ("editor/ghp_" + "aB3" * 12, None),
        ("claude-code/2.1.3", ("claude-code", "2.1.3")),
    ],
)
def test_a_malformed_client_header_or_one_holding_a_credential_is_dropped(header, expected) -> None:
    assert parse_client_header(header) == expected


def ids(n: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=i + 1) for i in range(n)]


def test_related_code_takes_at_most_two_per_relation_and_six_in_all() -> None:
    anchor_a, anchor_b, *others = ids(20)
    edges = [{"from_chunk_id": anchor_a, "to_chunk_id": o, "relation": "calls"} for o in others[:5]]
    edges += [
        {"from_chunk_id": o, "to_chunk_id": anchor_a, "relation": "calls"} for o in others[5:9]
    ]
    edges += [
        {"from_chunk_id": anchor_a, "to_chunk_id": o, "relation": "tested_by"} for o in others[9:12]
    ]
    edges += [
        {"from_chunk_id": anchor_b, "to_chunk_id": o, "relation": "calls"} for o in others[12:]
    ]

    picks = pick_related([anchor_a, anchor_b], edges, exclude=set())

    assert len(picks) == 6
    by = [(p.related_to, p.relation) for p in picks]
    assert by.count((anchor_a, "calls")) == 2
    assert by.count((anchor_a, "called_by")) == 2
    assert by.count((anchor_a, "tested_by")) == 1
    assert by.count((anchor_b, "calls")) == 1, "round-robin: the second anchor gets its turn"


def test_a_test_that_calls_the_anchor_is_tested_by_and_leaves_called_by_to_other_callers() -> None:
    anchor, test, callers = ids(1)[0], uuid.UUID(int=100), ids(4)[1:]
    edges = [{"from_chunk_id": test, "to_chunk_id": anchor, "relation": "calls"}]
    edges += [{"from_chunk_id": c, "to_chunk_id": anchor, "relation": "calls"} for c in callers]
    edges += [{"from_chunk_id": anchor, "to_chunk_id": test, "relation": "tested_by"}]

    picks = pick_related([anchor], edges, exclude=set())

    assert [(p.chunk_id, p.relation) for p in picks if p.relation == "tested_by"] == [
        (test, "tested_by")
    ]
    assert [p.chunk_id for p in picks if p.relation == "called_by"] == callers[:2]


def test_related_code_skips_chunks_already_delivered_and_uses_only_top_three_anchors() -> None:
    a1, a2, a3, a4, delivered, fresh = ids(6)
    edges = [
        {"from_chunk_id": a1, "to_chunk_id": delivered, "relation": "calls"},
        {"from_chunk_id": a1, "to_chunk_id": fresh, "relation": "calls"},
        {"from_chunk_id": a4, "to_chunk_id": uuid.uuid4(), "relation": "calls"},
    ]

    picks = pick_related([a1, a2, a3, a4], edges, exclude={delivered})

    assert [(p.chunk_id, p.related_to, p.relation) for p in picks] == [(fresh, a1, "calls")]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_search_cache_expires_after_60_seconds() -> None:
    clock = FakeClock()
    cache = SearchCache(clock=clock)
    entry = CachedSearch(candidates=(), source_states={})
    cache.put("k", entry)

    clock.now = 59.0
    assert cache.get("k") is entry
    clock.now = 60.5
    assert cache.get("k") is None


def test_the_search_cache_evicts_the_least_recently_used() -> None:
    cache = SearchCache(max_entries=2)
    for key in ("a", "b"):
        cache.put(key, CachedSearch(candidates=(), source_states={}))
    cache.get("a")
    cache.put("c", CachedSearch(candidates=(), source_states={}))

    assert cache.get("b") is None
    assert cache.get("a") is not None
