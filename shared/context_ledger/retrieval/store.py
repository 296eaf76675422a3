"""SQL of the retrieve use case: chunk payloads and code-graph neighbours, of the searched versions
only."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import psycopg

Row = dict[str, Any]

# One table, no join with sources: planning the join cost 0.2 ms a retrieval (docs/decisions.md).
_CHUNKS = """
SELECT c.id, c.source_id, c.index_version, c.path, c.language, c.symbol, c.start_line,
       c.end_line, c.content, c.content_sha256, c.token_count, c.metadata
FROM chunks c
WHERE c.org_id = %(org_id)s AND c.id = ANY(%(ids)s)
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
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    ids: list[uuid.UUID],
    versions: Mapping[uuid.UUID, int],
) -> dict[uuid.UUID, Row]:
    """The rows of ``ids`` that belong to the given sources at the given index versions (those
    the retrieval searched, read with its chain): a chunk of another source, or of a version
    re-indexed or deleted since, is left out."""
    if not ids:
        return {}
    rows = conn.execute(_CHUNKS, {"org_id": org_id, "ids": ids}).fetchall()
    return {
        row["id"]: row for row in rows if versions.get(row["source_id"]) == row["index_version"]
    }


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
