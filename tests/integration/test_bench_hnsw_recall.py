"""bench/hnsw_recall.py measures our index: same definition as search/vectors.py's, recall
counted against the exact neighbours, the MiniLM vectors cached by the texts they embed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))  # appended: the scripts import each other by file name

import hnsw_recall  # noqa: E402

TABLE = "hnsw_recall_test"


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        try:
            yield connection
        finally:
            connection.execute(f"DROP TABLE IF EXISTS {TABLE}")


def vectors(count: int, seed: int) -> np.ndarray:
    return hnsw_recall.unit(np.random.default_rng(seed).normal(size=(count, 384)))


def test_the_table_gets_the_index_the_pgvector_backend_builds(conn) -> None:
    hnsw_recall.load_table(conn, TABLE, vectors(50, seed=1))

    (definition,) = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
        (TABLE, "%USING hnsw%"),
    ).fetchone()
    assert "halfvec(384)" in definition
    assert "halfvec_cosine_ops" in definition
    assert "WITH" not in definition  # pgvector's default m and ef_construction, as ours


def test_recall_is_counted_against_the_exact_neighbours(conn) -> None:
    passages, queries = vectors(300, seed=2), vectors(5, seed=3)
    truth = np.argsort(-(queries @ passages.T), axis=1)[:, : hnsw_recall.LIMIT]
    hnsw_recall.load_table(conn, TABLE, passages)

    # A list longer than the table: the scan visits every row, so it finds the exact top 100.
    exact = hnsw_recall.measure(conn, TABLE, queries, truth, ef=400)
    assert exact["recall_at_10"] == 1.0
    assert exact["recall_at_100"] == 1.0
    # Against the wrong truth (another query's neighbours) the same hits score below 1.
    shifted = hnsw_recall.measure(conn, TABLE, queries, np.roll(truth, 1, axis=0), ef=400)
    assert shifted["recall_at_10"] < 1.0
    assert 0 < exact["p50_ms"] <= exact["p95_ms"]


def test_minilm_vectors_are_computed_once_per_text_list(monkeypatch, tmp_path) -> None:
    calls: list[list[str]] = []

    def embed(texts: list[str], torch_python: str) -> np.ndarray:
        calls.append(texts)
        return np.ones((len(texts), 384), np.float32)

    monkeypatch.setattr(hnsw_recall, "CACHE", tmp_path)
    monkeypatch.setattr(hnsw_recall, "_minilm", embed)

    first = hnsw_recall.minilm_vectors(["a", "b"], "no-python")
    again = hnsw_recall.minilm_vectors(["a", "b"], "no-python")
    other = hnsw_recall.minilm_vectors(["a", "c"], "no-python")

    assert calls == [["a", "b"], ["a", "c"]]
    assert np.array_equal(first, again)
    assert other.shape == (2, 384)
