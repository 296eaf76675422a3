"""BM25 term weights and the terms the text search matches."""

from __future__ import annotations

import math

import pytest

from context_ledger.search import bm25
from context_ledger.search.bm25 import TermStats, idf, matched, query_terms


def term(lexeme: str, chunks: int) -> TermStats:
    return TermStats(lexeme, f"'{lexeme}'", chunks)


def test_a_rarer_term_weighs_more_and_no_term_weighs_less_than_zero() -> None:
    assert idf(1, 1000) > idf(10, 1000) > idf(900, 1000) > 0
    assert idf(1000, 1000) == pytest.approx(math.log(1 + 0.5 / 1000.5))


def test_matching_takes_the_rarest_terms_while_their_chunks_stay_within_the_limit() -> None:
    terms = [term("common", 40_000), term("rare", 30), term("mid", 3_000), term("other", 2_000)]

    within = matched(terms, postings=5_030)
    over = matched(terms, postings=5_029)

    # rare (30) + other (2,000) + mid (3,000) = 5,030 chunks; common would go far over.
    assert [t.lexeme for t in within] == ["rare", "other", "mid"]
    assert [t.lexeme for t in over] == ["rare", "other"]


def test_matching_always_keeps_the_rarest_term_even_when_it_alone_is_over_the_limit() -> None:
    chosen = matched([term("the", 90_000), term("study", 60_000)], postings=5_000)

    assert [t.lexeme for t in chosen] == ["study"]


def test_query_terms_weigh_each_term_and_average_the_chunk_length() -> None:
    terms = query_terms([term("refund", 2), term("policy", 8)], chunks=10, tokens=250)

    assert terms.lexemes == ("refund", "policy")
    assert terms.weights == (idf(2, 10), idf(8, 10))
    assert terms.match == ("'refund'", "'policy'")
    assert terms.hybrid_match == ("'refund'", "'policy'")
    assert terms.average_length == 25.0


def test_beside_a_vector_search_the_text_search_matches_within_a_smaller_bound() -> None:
    assert bm25.HYBRID_MATCH_POSTINGS < bm25.MATCH_POSTINGS
    room = bm25.HYBRID_MATCH_POSTINGS
    common = bm25.MATCH_POSTINGS - room - 1  # the three together: MATCH_POSTINGS exactly
    terms = [term("rare", room // 2), term("mid", room // 2 + 1), term("common", common)]

    found = query_terms(terms, chunks=100_000, tokens=3_000_000)

    assert found.match == ("'rare'", "'mid'", "'common'")
    assert found.hybrid_match == ("'rare'",)  # rare + mid is one over the bound
    assert found.lexemes == ("rare", "mid", "common"), "every term still weighs in the rank"


def test_a_hybrid_search_still_matches_the_rarest_term_over_the_bound() -> None:
    found = query_terms([term("study", 60_000), term("the", 90_000)], chunks=100_000, tokens=1)

    assert found.hybrid_match == found.match == ("'study'",)


@pytest.mark.parametrize(
    ("terms", "chunks"), [([], 10), ([term("refund", 0)], 10), ([term("refund", 1)], 0)]
)
def test_no_term_in_the_searched_chunks_gives_no_terms(terms, chunks) -> None:
    found = query_terms(terms, chunks=chunks, tokens=100)

    assert (found.lexemes, found.weights, found.match, found.hybrid_match) == ((), (), (), ())


def test_a_term_the_query_repeats_weighs_its_idf_times_its_repeats() -> None:
    repeated = TermStats("refund", "'refund'", 2, repeats=3)

    terms = query_terms([repeated, term("policy", 8)], chunks=10, tokens=250)

    assert terms.weights == (pytest.approx(3 * idf(2, 10)), pytest.approx(idf(8, 10)))


def test_repeats_do_not_change_which_terms_are_matched() -> None:
    once = query_terms([term("refund", 2), term("policy", 8)], chunks=10, tokens=250)
    repeated = query_terms(
        [TermStats("refund", "'refund'", 2, repeats=1), TermStats("policy", "'policy'", 8, 5)],
        chunks=10,
        tokens=250,
    )

    assert (repeated.match, repeated.hybrid_match) == (once.match, once.hybrid_match)
