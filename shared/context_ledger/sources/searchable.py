"""Which chunks searches may see: those of each source's current index version, only.

Every search query (full-text, vector, related code) joins through :data:`SEARCHABLE_CHUNKS`
(or :func:`searchable_among`, the same rule over rows the full-text index narrowed), so
an unpublished build, a superseded version and a deleted source are invisible by construction. The
one exception states the same rule as filters on chunk columns: the pgvector backend's HNSW query,
whose index the planner will not use under the join. It filters on each source's current version
as read in the same search step (by :func:`pending_current_versions`, or with the sources'
rows: ``retrieval/chain.py``), and the answer reads only the rows of those versions
(``sources.store.chunks_by_id``).
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

import psycopg

from context_ledger.db.pending import Pending, send
from context_ledger.spaces.levels import Level


def searchable_among(rows: str) -> str:
    """``FROM`` clause of the searchable chunks among ``rows`` (``chunks``, or a parenthesised
    subquery of chunk rows a search has already narrowed); bind ``org_id`` and ``source_ids``."""
    return f"""
{rows} c
JOIN sources s ON s.id = c.source_id AND s.org_id = c.org_id AND c.index_version = s.index_version
WHERE s.org_id = %(org_id)s AND s.id = ANY(%(source_ids)s)
"""


#: ``FROM`` clause of searchable chunks; bind ``org_id`` and ``source_ids``.
SEARCHABLE_CHUNKS = searchable_among("chunks")


_CURRENT_VERSIONS = """
SELECT s.id, s.index_version, sp.level FROM sources s JOIN spaces sp ON sp.id = s.space_id
WHERE s.org_id = %(org_id)s AND s.id = ANY(%(source_ids)s) AND s.index_version > 0
"""


def pending_current_versions(
    conn: psycopg.Connection, *, org_id: uuid.UUID, source_ids: list[uuid.UUID]
) -> Pending[dict[uuid.UUID, CurrentVersion]]:
    """The current (published) index version and space level of each of the sources that has
    one, sent now and read later (db/pending.py)."""
    params = {"org_id": org_id, "source_ids": source_ids}
    return send(
        conn,
        _CURRENT_VERSIONS,
        params,
        lambda cursor: {
            row["id"]: CurrentVersion(row["index_version"], Level(row["level"]))
            for row in cursor.fetchall()
        },
    )


class CurrentVersion(NamedTuple):
    """A source's published index version, and the level of its space."""

    version: int
    level: Level
