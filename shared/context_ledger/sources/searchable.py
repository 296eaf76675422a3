"""Which chunks searches may see: those of each source's current index version, only.

Every search query (full-text, vector, related code) joins through :data:`SEARCHABLE_CHUNKS`, so
an unpublished build, a superseded version and a deleted source are invisible by construction. The
one exception states the same rule as filters on chunk columns: the pgvector backend's HNSW query,
whose index the planner will not use under the join. It filters on each source's current version
as read in the same search step (by :func:`pending_current_versions`, or with the sources'
rows: ``retrieval/chain.py``), and the answer reads only the rows of those versions
(``retrieval/store.py``).
"""

from __future__ import annotations

import uuid

import psycopg

from context_ledger.db.pending import Pending, send

#: ``FROM`` clause of searchable chunks; bind ``org_id`` and ``source_ids``.
SEARCHABLE_CHUNKS = """
chunks c
JOIN sources s ON s.id = c.source_id AND s.org_id = c.org_id AND c.index_version = s.index_version
WHERE s.org_id = %(org_id)s AND s.id = ANY(%(source_ids)s)
"""

_CURRENT_VERSIONS = """
SELECT id, index_version FROM sources
WHERE org_id = %(org_id)s AND id = ANY(%(source_ids)s) AND index_version > 0
"""

_CURRENT_CHUNKS = f"""
SELECT c.id, c.source_id, c.index_version, c.path, c.symbol, c.content
FROM {SEARCHABLE_CHUNKS}
ORDER BY c.path, c.ordinal
"""


def current_chunks(
    conn: psycopg.Connection, *, org_id: uuid.UUID, source_ids: list[uuid.UUID]
) -> list[dict]:
    """Every searchable chunk of the given sources (for inspection and tests)."""
    return conn.execute(_CURRENT_CHUNKS, {"org_id": org_id, "source_ids": source_ids}).fetchall()


def pending_current_versions(
    conn: psycopg.Connection, *, org_id: uuid.UUID, source_ids: list[uuid.UUID]
) -> Pending[dict[uuid.UUID, int]]:
    """The current (published) index version of each of the sources that has one, sent now and
    read later (db/pending.py)."""
    params = {"org_id": org_id, "source_ids": source_ids}
    return send(
        conn,
        _CURRENT_VERSIONS,
        params,
        lambda cursor: {row["id"]: row["index_version"] for row in cursor.fetchall()},
    )
