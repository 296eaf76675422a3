"""SQL of the retrieve use case: code-graph neighbours, of the searched versions only (the
chunks' rows come from their owner, ``sources.store.chunks_by_id``)."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

Row = dict[str, Any]

# Edges of the served versions that touch the anchors: their callees and tests (anchor → x) and
# their callers (x calls anchor).
_NEIGHBOURS = """
SELECT e.from_chunk_id, e.to_chunk_id, e.relation
FROM code_edges e
JOIN sources s ON s.id = e.source_id AND e.index_version = s.index_version
WHERE s.org_id = %(org_id)s AND s.id = ANY(%(source_ids)s)
  AND (e.from_chunk_id = ANY(%(anchors)s)
       OR (e.to_chunk_id = ANY(%(anchors)s) AND e.relation = 'calls'))
ORDER BY e.from_chunk_id, e.to_chunk_id, e.relation
"""


def neighbours(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    source_ids: list[uuid.UUID],
    anchors: list[uuid.UUID],
) -> list[Row]:
    if not anchors:
        return []
    params = {"org_id": org_id, "source_ids": source_ids, "anchors": anchors}
    return conn.execute(_NEIGHBOURS, params).fetchall()
