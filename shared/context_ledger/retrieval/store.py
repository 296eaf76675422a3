"""SQL of the retrieve use case: chunk payloads and code-graph neighbours, current versions only."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

Row = dict[str, Any]

_CHUNKS = """
SELECT c.id, c.source_id, c.index_version, c.path, c.language, c.symbol, c.start_line,
       c.end_line, c.content, c.content_sha256, c.token_count, c.metadata
FROM chunks c
JOIN sources s ON s.id = c.source_id AND s.org_id = c.org_id AND c.index_version = s.index_version
WHERE s.org_id = %(org_id)s AND c.id = ANY(%(ids)s)
"""

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


def chunks_by_id(
    conn: psycopg.Connection, *, org_id: uuid.UUID, ids: list[uuid.UUID]
) -> dict[uuid.UUID, Row]:
    if not ids:
        return {}
    rows = conn.execute(_CHUNKS, {"org_id": org_id, "ids": ids}).fetchall()
    return {row["id"]: row for row in rows}


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
