"""bench/reference.py: the offline BM25, dense and fusion rankings the quality table compares the
API with, on corpora small enough to check by hand."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))

import numpy as np  # noqa: E402
import reference  # noqa: E402

# Stemmed and without stop words: [cat, chase, mice] (3), [dog, chase, cat, cat] (4), [bird, sing]
# (2); 3 documents, average length 3.
CORPUS = ["Cats chase mice.", "The dogs chase cats, cats!", "Birds sing"]
IDF_OF_TWO = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # a term two of the three documents hold


def tf_part(tf: int, length: int) -> float:
    return tf / (tf + 1.2 * (1 - 0.75 + 0.75 * length / 3))


@pytest.fixture(scope="module")
def bm25() -> reference.Bm25:
    return reference.Bm25(CORPUS)


def test_bm25_is_lucenes_formula_over_stemmed_terms_without_stop_words(bm25):
    assert bm25.tokens("The cats are chasing") == ["cat", "chase"]
    scores = bm25.scores("cats")

    assert scores == pytest.approx(
        [IDF_OF_TWO * tf_part(1, 3), IDF_OF_TWO * tf_part(2, 4), 0.0], rel=1e-6
    )
    assert scores[0] == pytest.approx(0.470 / 2.2, abs=1e-3)  # ln 1.6 = .470, 1 / (1 + 1.2)
    assert scores[1] == pytest.approx(0.470 * 2 / 3.5, abs=1e-3)  # 2 / (2 + 1.2 * 1.25)


def test_bm25_counts_a_query_terms_repeats(bm25):
    once, twice = bm25.scores("cat chase"), bm25.scores("cats chase cat")

    assert twice - once == pytest.approx(bm25.scores("cat"), rel=1e-6)
    assert bm25.tokens("cats chase cat") == ["cat", "chase", "cat"]


def test_a_query_no_document_holds_scores_zero_and_ranks_nothing(bm25):
    assert bm25.scores("zebra the").tolist() == [0.0, 0.0, 0.0]
    assert reference.bm25_order(bm25, "zebra") == []
    assert reference.bm25_order(bm25, "cats") == [1, 0]
    assert reference.bm25_order(bm25, "cats", depth=1) == [1]


def test_an_empty_document_is_indexed_and_never_matched():
    index = reference.Bm25(["cats", ""])

    assert index.scores("cats")[1] == 0.0


def test_dense_scores_a_document_by_its_best_chunk_and_skips_those_without_vectors():
    dense = reference.Dense.of([[[1.0, 0.0]], [[0.0, 3.0], [1.0, 1.0]], []])

    scores = dense.scores([2.0, 0.0])

    assert scores[:2] == pytest.approx([1.0, 1 / math.sqrt(2)])
    assert scores[2] == -np.inf
    assert reference.dense_order(dense, [2.0, 0.0]) == [0, 1]
    assert reference.dense_order(dense, [0.0, 1.0]) == [1, 0]


def test_fusion_is_point7_cosine_plus_point3_bm25_over_its_max():
    order, scores = reference.fuse(np.array([0.9, 0.2, 0.5]), np.array([1.0, 2.0, 0.0]))

    assert scores == pytest.approx({0: 0.63 + 0.15, 1: 0.14 + 0.3, 2: 0.35})
    assert order == [0, 1, 2]


def test_fusion_ranks_the_union_of_each_sides_top_by_score_alone_without_tiers():
    cosines = np.array([0.9, 0.1, 0.5, 0.8])
    bm25 = np.array([0.0, 1.0, 0.5, 0.0])

    order, scores = reference.fuse(cosines, bm25, depth=2)

    # cosine's top 2: 0, 3; BM25's: 1, 2 (document 0 and 3 match no term)
    assert set(scores) == {0, 1, 2, 3}
    assert scores[2] == pytest.approx(0.35 + 0.15)  # found by both
    assert order == [0, 3, 2, 1]  # documents found by one side alone may rank above it
    narrow, _ = reference.fuse(cosines, bm25, depth=1)
    assert narrow == [0, 1]


def test_the_fusion_order_of_a_query_fuses_its_bm25_and_its_cosines(bm25):
    dense = reference.Dense.of([[[1.0, 0.0]], [[0.6, 0.8]], [[0.0, 1.0]]])
    text = bm25.scores("cats")  # documents 0 and 1, 1 the higher

    order = reference.fusion_order(bm25, dense, "cats", [0.0, 1.0])

    expected = {0: 0.3 * text[0] / text[1], 1: 0.7 * 0.8 + 0.3, 2: 0.7}
    assert order == sorted(expected, key=lambda i: -expected[i]) == [1, 2, 0]
    assert reference.fusion_order(bm25, dense, "cats", [0.0, 1.0], depth=2) == [1, 2]


def test_fusion_without_a_matching_term_is_the_cosine_order_and_a_missing_vector_counts_zero():
    order, scores = reference.fuse(np.array([0.2, 0.6]), np.zeros(2))
    assert (order, scores) == ([1, 0], pytest.approx({0: 0.14, 1: 0.42}))

    order, scores = reference.fuse(np.array([0.5, -np.inf]), np.array([0.0, 1.0]))
    assert (order, scores) == ([0, 1], pytest.approx({0: 0.35, 1: 0.3}))


def test_ties_keep_the_corpus_order_and_runs_score_by_rank():
    assert reference.ordered(np.array([0.5, 0.7, 0.5, 0.7]), 3) == [1, 3, 0]
    runs = reference.runs_of(["a", "b", "c"], {"q": [2, 0, 1]})

    assert runs.top == {"q": {"c": 3.0, "a": 2.0, "b": 1.0}}
    assert runs.deep == runs.top
    many = reference.runs_of([str(i) for i in range(150)], {"q": list(range(150))})
    assert (len(many.top["q"]), len(many.deep["q"])) == (10, 100)


# The same corpus as the service's index holds it: one chunk per document, the third document cut
# into two chunks, each with its lexemes' occurrences and its length.
INDEXED = [
    reference.IndexedChunk(0, {"cat": 1, "chase": 1, "mice": 1}, 3),
    reference.IndexedChunk(1, {"dog": 1, "chase": 1, "cat": 2}, 4),
    reference.IndexedChunk(2, {"bird": 1}, 1),
    reference.IndexedChunk(2, {"sing": 1}, 1),
]


def test_index_bm25_is_the_same_formula_over_the_chunks_lexemes():
    index = reference.IndexBm25(INDEXED, documents=3)
    n, average = 4, 9 / 4  # chunks and their mean length, as the service counts them
    idf_of_two = math.log(1 + (n - 2 + 0.5) / (2 + 0.5))

    def part(tf: int, length: int) -> float:
        return tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * length / average))

    assert index.scores({"cat": 1}) == pytest.approx(
        [idf_of_two * part(1, 3), idf_of_two * part(2, 4), 0.0], rel=1e-9
    )
    assert index.scores({"cat": 2}) == pytest.approx(2 * index.scores({"cat": 1}), rel=1e-9)
    assert index.scores({"zebra": 1}).tolist() == [0.0, 0.0, 0.0]


def test_index_bm25_scores_a_document_by_its_best_chunk():
    index = reference.IndexBm25(INDEXED, documents=3)
    idf_of_one = math.log(1 + (4 - 1 + 0.5) / (1 + 0.5))

    bird, both = index.scores({"bird": 1}), index.scores({"bird": 1, "sing": 1})

    assert bird[2] > 0
    assert both[2] == pytest.approx(bird[2], rel=1e-9), "the best chunk, not the sum"
    assert bird[2] == pytest.approx(idf_of_one * 2.2 / (1 + 1.2 * (0.25 + 0.75 / 2.25)))


def test_of_identical_documents_only_the_first_ranked_stays():
    texts = ["# Glossary", "# Sorting", "# Glossary", "# Glossary"]

    assert reference.delivered_once([2, 1, 0, 3], texts) == [2, 1]
    assert reference.delivered_once([], texts) == []
