"""The memory vector cache: fetch what is missing or changed, serve the rest from memory."""

from __future__ import annotations

import numpy as np

from context_ledger.memory.vector_cache import VectorCache

IDS = ["ctx_000000000001", "ctx_000000000002", "ctx_000000000003"]


class Store:
    """Vectors by id as a database would hold them, counting what is fetched."""

    def __init__(self) -> None:
        self.vectors = {
            memory_id: np.full(2, n + 1, dtype="<f4") for n, memory_id in enumerate(IDS)
        }
        self.stamps = dict.fromkeys(IDS, 100.0)
        self.fetched: list[list[str]] = []

    def fetch(self, ids: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        self.fetched.append(ids)
        return (
            ids,
            np.array([self.stamps[i] for i in ids]),
            np.array([self.vectors[i] for i in ids], dtype="<f4"),
        )

    def call(self, cache: VectorCache, compatible=(True, True, True)):
        return cache.vectors(
            "project",
            dimensions=2,
            ids=IDS,
            updated_at=np.array([self.stamps[i] for i in IDS]),
            compatible=np.array(compatible),
            fetch=self.fetch,
        )


def test_a_cold_cache_fetches_the_compatible_vectors_once() -> None:
    store, cache = Store(), VectorCache()

    vectors, has = store.call(cache, compatible=(True, False, True))
    again, _ = store.call(cache, compatible=(True, False, True))

    assert store.fetched == [[IDS[0], IDS[2]]]
    assert vectors.tolist() == again.tolist() == [[1.0, 1.0], [0.0, 0.0], [3.0, 3.0]]
    assert has.tolist() == [True, False, True]


def test_a_changed_memory_is_fetched_again_alone() -> None:
    store, cache = Store(), VectorCache()
    store.call(cache)
    store.vectors[IDS[1]] = np.full(2, 9, dtype="<f4")
    store.stamps[IDS[1]] = 200.0

    vectors, _ = store.call(cache)

    assert store.fetched[1:] == [[IDS[1]]]
    assert vectors[1].tolist() == [9.0, 9.0]


def test_without_any_compatible_vector_nothing_is_fetched() -> None:
    store, cache = Store(), VectorCache()

    vectors, has = store.call(cache, compatible=(False, False, False))

    assert store.fetched == []
    assert vectors.shape == (3, 2)
    assert not has.any()


def test_rows_of_replaced_vectors_do_not_pile_up() -> None:
    store, cache = Store(), VectorCache()
    for stamp in range(2000):
        store.stamps[IDS[0]] = float(stamp)
        vectors, _ = store.call(cache)

    assert vectors[0].tolist() == [1.0, 1.0]
    assert len(cache._projects["project"].matrix) <= 2 * len(IDS) + 1024 + 1
