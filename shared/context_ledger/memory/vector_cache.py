"""Memory vectors kept in the function's memory between /relevant calls.

Reading 10,000 vectors (5 MB at 128 dimensions) is most of a /relevant call's database time, and
they change only when a memory's accepted revision does, which also moves its ``updated_at``. So a
warm function keeps, per project and embedding provider, each entry's vector under the
``updated_at`` it was read at; a call reads the small per-entry records, then fetches only the
vectors it does not hold at that ``updated_at`` (all of them on a cold start). The caller reads
records and vectors in one snapshot (REPEATABLE READ), so a fetched vector always belongs to the
record it is scored with. Like the retrieval search cache, it lives in one container; a cold one
starts empty (docs/decisions.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

#: Projects (per provider) kept; the least recently used goes first.
MAX_PROJECTS = 16

#: ``fetch(ids)`` → the ids found, their ``updated_at`` and their vectors (one row each).
Fetch = Callable[[list[str]], tuple[list[str], np.ndarray, np.ndarray]]


@dataclass
class _Project:
    dimensions: int
    matrix: np.ndarray
    #: entry id → (updated_at it was read at, row of ``matrix``)
    rows: dict[str, tuple[float, int]] = field(default_factory=dict)


class VectorCache:
    """Unit vectors of memories by (project, provider), valid for one ``updated_at`` each."""

    def __init__(self, max_projects: int = MAX_PROJECTS) -> None:
        self._max_projects = max_projects
        self._projects: OrderedDict[Hashable, _Project] = OrderedDict()
        self._lock = threading.Lock()

    def vectors(
        self,
        key: Hashable,
        *,
        dimensions: int,
        ids: Sequence[str],
        updated_at: np.ndarray,
        compatible: np.ndarray,
        fetch: Fetch,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One vector per id (zeros where it has none) and whether it has one. Only ids whose
        record says their vector is ``compatible`` (this provider and dimension) are fetched."""
        with self._lock:
            project = self._project(key, dimensions)
            stamps = updated_at.tolist()
            wanted = [
                i
                for i in np.flatnonzero(compatible).tolist()
                if project.rows.get(ids[i], (None,))[0] != stamps[i]
            ]
            if wanted:
                self._add(project, *fetch([ids[i] for i in wanted]))
            found = [project.rows.get(memory_id) for memory_id in ids]
            has = compatible & np.array(
                [
                    row is not None and row[0] == stamp
                    for row, stamp in zip(found, stamps, strict=True)
                ],
                dtype=bool,
            )
            if len(project.matrix):
                index = [row[1] if row is not None else 0 for row in found]
                gathered = project.matrix[np.array(index, dtype=np.intp)]
                gathered[~has] = 0.0
            else:
                gathered = np.zeros((len(ids), dimensions), dtype="<f4")
            if len(project.matrix) > 2 * len(ids) + 1024:  # mostly stale rows: keep the live ones
                self._projects[key] = _Project(
                    dimensions,
                    gathered[has].copy(),
                    {ids[i]: (stamps[i], n) for n, i in enumerate(np.flatnonzero(has).tolist())},
                )
            return gathered, has

    def clear(self) -> None:
        with self._lock:
            self._projects.clear()

    def _project(self, key: Hashable, dimensions: int) -> _Project:
        project = self._projects.get(key)
        if project is None or project.dimensions != dimensions:
            project = _Project(dimensions, np.zeros((0, dimensions), dtype="<f4"))
            self._projects[key] = project
        self._projects.move_to_end(key)
        while len(self._projects) > self._max_projects:
            self._projects.popitem(last=False)
        return project

    @staticmethod
    def _add(
        project: _Project, ids: list[str], updated_at: np.ndarray, vectors: np.ndarray
    ) -> None:
        start = len(project.matrix)
        project.matrix = np.concatenate([project.matrix, vectors]) if start else vectors.copy()
        for offset, (memory_id, stamp) in enumerate(zip(ids, updated_at.tolist(), strict=True)):
            project.rows[memory_id] = (stamp, start + offset)
