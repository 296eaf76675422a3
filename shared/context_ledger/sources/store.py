"""SQL for sources and index versions. Every query is scoped by organisation or by a source row
the caller already resolved within its organisation."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import psycopg

Row = dict[str, Any]

_SOURCE_COLUMNS = (
    "id, org_id, space_id, kind, name, classification, index_version, created_at, updated_at"
)

_INSERT_SOURCE = f"""
INSERT INTO sources (org_id, space_id, kind, name, classification)
VALUES (%(org_id)s, %(space_id)s, %(kind)s, %(name)s, %(classification)s)
RETURNING {_SOURCE_COLUMNS}
"""

_GET_SOURCE = f"SELECT {_SOURCE_COLUMNS} FROM sources WHERE org_id = %(org_id)s AND id = %(id)s"

_LOCK_SOURCE = f"""
SELECT {_SOURCE_COLUMNS} FROM sources WHERE org_id = %(org_id)s AND id = %(id)s FOR UPDATE
"""

_LIST_SOURCES = f"""
SELECT {_SOURCE_COLUMNS} FROM sources
WHERE org_id = %(org_id)s AND space_id = %(space_id)s
ORDER BY created_at, id
"""

_DELETE_SOURCE = "DELETE FROM sources WHERE org_id = %(org_id)s AND id = %(id)s"

_VERSION_COLUMNS = (
    "source_id, version, state, document_count, chunk_count, token_count, edge_count,"
    " embedded_count, created_at, published_at"
)

_OPEN_VERSION = f"""
INSERT INTO index_versions (source_id, version, state)
SELECT %(source_id)s, COALESCE(max(version), 0) + 1, 'building'
FROM index_versions WHERE source_id = %(source_id)s
RETURNING {_VERSION_COLUMNS}
"""

_GET_VERSION = f"""
SELECT {_VERSION_COLUMNS} FROM index_versions
WHERE source_id = %(source_id)s AND version = %(version)s
"""

_LIST_VERSIONS = f"""
SELECT {_VERSION_COLUMNS} FROM index_versions WHERE source_id = %(source_id)s ORDER BY version
"""

_ADD_COUNTS = """
UPDATE index_versions
SET document_count = document_count + %(documents)s, chunk_count = chunk_count + %(chunks)s,
    token_count = token_count + %(tokens)s, embedded_count = embedded_count + %(embedded)s
WHERE source_id = %(source_id)s AND version = %(version)s
"""

_SUPERSEDE = """
UPDATE index_versions SET state = 'superseded'
WHERE source_id = %(source_id)s AND state = 'published'
"""

_PUBLISH = f"""
UPDATE index_versions SET state = 'published', published_at = now(), edge_count = %(edges)s
WHERE source_id = %(source_id)s AND version = %(version)s
RETURNING {_VERSION_COLUMNS}
"""

_ABORT = f"""
UPDATE index_versions SET state = 'aborted'
WHERE source_id = %(source_id)s AND version = %(version)s AND state = 'building'
RETURNING {_VERSION_COLUMNS}
"""

_POINT_SOURCE = """
UPDATE sources SET index_version = %(version)s, updated_at = now() WHERE id = %(source_id)s
"""

_DROP_SUPERSEDED_CHUNKS = """
DELETE FROM chunks c USING index_versions v
WHERE v.source_id = %(source_id)s AND v.state = 'superseded'
  AND c.source_id = v.source_id AND c.index_version = v.version
"""


def insert_source(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    space_id: uuid.UUID,
    kind: str,
    name: str,
    classification: str,
) -> Row:
    params = {
        "org_id": org_id,
        "space_id": space_id,
        "kind": kind,
        "name": name,
        "classification": classification,
    }
    row = conn.execute(_INSERT_SOURCE, params).fetchone()
    assert row is not None
    return row


def get_source(
    conn: psycopg.Connection, *, org_id: uuid.UUID, source_id: uuid.UUID, lock: bool = False
) -> Row | None:
    query = _LOCK_SOURCE if lock else _GET_SOURCE
    return conn.execute(query, {"org_id": org_id, "id": source_id}).fetchone()


def list_sources(conn: psycopg.Connection, *, org_id: uuid.UUID, space_id: uuid.UUID) -> list[Row]:
    return conn.execute(_LIST_SOURCES, {"org_id": org_id, "space_id": space_id}).fetchall()


def delete_source(conn: psycopg.Connection, *, org_id: uuid.UUID, source_id: uuid.UUID) -> bool:
    return conn.execute(_DELETE_SOURCE, {"org_id": org_id, "id": source_id}).rowcount == 1


def open_version(conn: psycopg.Connection, *, source_id: uuid.UUID) -> Row:
    """A new build, numbered after every earlier one (call with the source row locked)."""
    row = conn.execute(_OPEN_VERSION, {"source_id": source_id}).fetchone()
    assert row is not None
    return row


def get_version(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> Row | None:
    return conn.execute(_GET_VERSION, {"source_id": source_id, "version": version}).fetchone()


def list_versions(conn: psycopg.Connection, *, source_id: uuid.UUID) -> list[Row]:
    return conn.execute(_LIST_VERSIONS, {"source_id": source_id}).fetchall()


def add_counts(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    version: int,
    documents: int,
    chunks: int,
    tokens: int,
    embedded: int,
) -> None:
    conn.execute(
        _ADD_COUNTS,
        {
            "source_id": source_id,
            "version": version,
            "documents": documents,
            "chunks": chunks,
            "tokens": tokens,
            "embedded": embedded,
        },
    )


def publish_version(
    conn: psycopg.Connection, *, source_id: uuid.UUID, version: int, edges: int
) -> Row:
    """Flip the source to ``version`` (call with the source row locked, in one transaction)."""
    conn.execute(_SUPERSEDE, {"source_id": source_id})
    row = conn.execute(
        _PUBLISH, {"source_id": source_id, "version": version, "edges": edges}
    ).fetchone()
    assert row is not None
    conn.execute(_POINT_SOURCE, {"source_id": source_id, "version": version})
    return row


def abort_version(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> Row:
    """Mark an open build aborted (call with the source row locked, the build open)."""
    row = conn.execute(_ABORT, {"source_id": source_id, "version": version}).fetchone()
    assert row is not None
    return row


def drop_superseded_chunks(conn: psycopg.Connection, *, source_id: uuid.UUID) -> int:
    """Remove the rows of versions no longer served (after the publish committed)."""
    return conn.execute(_DROP_SUPERSEDED_CHUNKS, {"source_id": source_id}).rowcount


_CREATE_EMBEDDING_LOAD = "CREATE TEMP TABLE embedding_load (id uuid NOT NULL, embedding real[])"
_COPY_EMBEDDINGS = "COPY embedding_load (id, embedding) FROM STDIN (FORMAT BINARY)"
_UPDATE_FROM_EMBEDDING_LOAD = """
UPDATE chunks SET embedding = load.embedding, embedding_model = %(model)s
FROM embedding_load AS load
WHERE chunks.id = load.id
"""
_DROP_EMBEDDING_LOAD = "DROP TABLE embedding_load"


def store_embeddings(
    conn: psycopg.Connection, rows: Sequence[tuple[uuid.UUID, list[float]]], model: str
) -> int:
    """Set the embedding (and model) of existing chunks, one row per chunk; return rows updated.

    One binary COPY into a temporary table and one UPDATE, whatever the number of rows. The
    generated columns (dimension, pgvector's vector) follow in the same statement.
    """
    if not rows:
        return 0
    with conn.transaction():
        conn.execute(_CREATE_EMBEDDING_LOAD)
        with conn.cursor() as cursor, cursor.copy(_COPY_EMBEDDINGS) as copy:
            copy.set_types(["uuid", "float4[]"])
            for chunk_id, vector in rows:
                copy.write_row((chunk_id, vector))
        updated = conn.execute(_UPDATE_FROM_EMBEDDING_LOAD, {"model": model}).rowcount
        conn.execute(_DROP_EMBEDDING_LOAD)
    return updated
