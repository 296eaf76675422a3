"""SQL for sources, their index versions and everything an index version holds: its chunks, the
documents a build keeps for the code graph, and the graph's edges. The one owner of these
tables: the indexer (sources/indexer.py), source re-embedding (sources/reembed.py), the memory
API (a memory is a chunk of its project's memory source) and retrieval call the functions here;
only the searches' own read statements (search/, through sources/searchable.py's rule of which
chunks may be seen) read chunks elsewhere.

Every query is scoped by organisation or by a source row the caller already resolved within its
organisation."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

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

# A memory source is served from its first write on: its only version is published empty, and
# its chunks come and go one memory at a time (:func:`replace_served_chunk`).
_PUBLISH_FIRST_VERSION = """
WITH version AS (
    INSERT INTO index_versions (source_id, version, state, published_at)
    VALUES (%(source_id)s, 1, 'published', now())
)
UPDATE sources SET index_version = 1, updated_at = now() WHERE id = %(source_id)s
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

_BUILD_COUNTS = """
SELECT count(DISTINCT path) AS documents, count(*) AS chunks,
       COALESCE(sum(token_count), 0) AS tokens, count(embedding) AS embedded
FROM chunks WHERE source_id = %(source_id)s AND index_version = %(version)s
"""

_SET_COUNTS = """
UPDATE index_versions
SET document_count = %(documents)s, chunk_count = %(chunks)s, token_count = %(tokens)s,
    embedded_count = %(embedded)s
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


def publish_first_version(conn: psycopg.Connection, *, source_id: uuid.UUID) -> None:
    """Publish a new memory source's (only) index version, empty, and point the source at it."""
    conn.execute(_PUBLISH_FIRST_VERSION, {"source_id": source_id})


def get_version(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> Row | None:
    return conn.execute(_GET_VERSION, {"source_id": source_id, "version": version}).fetchone()


def list_versions(conn: psycopg.Connection, *, source_id: uuid.UUID) -> list[Row]:
    return conn.execute(_LIST_VERSIONS, {"source_id": source_id}).fetchall()


def add_counts(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    version: int,
    documents: int = 0,
    chunks: int = 0,
    tokens: int = 0,
    embedded: int = 0,
) -> None:
    """Move the version's counters (the sources API reports them) by what a write changed."""
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


def record_build_counts(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> Row:
    """Count the build's documents, chunks, tokens and embedded chunks, and store the counts on
    its version (before it is published); the counts (``documents``, ``chunks``, ``tokens``,
    ``embedded``)."""
    where = {"source_id": source_id, "version": version}
    row = conn.execute(_BUILD_COUNTS, where).fetchone()
    assert row is not None
    conn.execute(_SET_COUNTS, {**where, **row})
    return row


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


# --- chunks --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewChunk:
    """A chunk to store: a piece of a document (or a memory), the text full-text search indexes
    of it, and its vector."""

    path: str
    #: its place within its document
    ordinal: int
    content: str
    content_sha256: bytes
    token_count: int
    #: what the full-text index holds of it: its words once redacted (sources/indexer.py says why)
    search_text: str
    #: None: the chunk is found by full-text search only
    embedding: list[float] | None
    metadata: dict[str, Any]
    language: str | None = None
    symbol: str | None = None
    start_line: int | None = None
    end_line: int | None = None


# --- a build's chunks, documents and code graph (sources/indexer.py) ------------------------------

_CREATE_LOAD_TABLE = """
CREATE TEMP TABLE chunk_load (
    id uuid, ordinal integer, path text, language text, symbol text, start_line integer,
    end_line integer, content text, content_sha256 bytea, token_count integer,
    search_text text, embedding real[], metadata jsonb
) ON COMMIT DROP
"""

_COPY_LOAD = """
COPY chunk_load (id, ordinal, path, language, symbol, start_line, end_line, content,
                 content_sha256, token_count, search_text, embedding, metadata) FROM STDIN
"""

_REPLACE_PATHS = """
DELETE FROM chunks
WHERE source_id = %(source_id)s AND index_version = %(version)s AND path = ANY(%(paths)s)
"""

_INSERT_FROM_LOAD = """
INSERT INTO chunks (id, org_id, source_id, index_version, ordinal, path, language, symbol,
                    start_line, end_line, content, content_sha256, token_count, tsv, embedding,
                    embedding_model, metadata)
SELECT id, %(org_id)s, %(source_id)s, %(version)s, ordinal, path, language, symbol, start_line,
       end_line, content, content_sha256, token_count, to_tsvector('english', search_text),
       embedding, CASE WHEN embedding IS NULL THEN NULL ELSE %(model)s END, metadata
FROM chunk_load
"""

_STORE_DOCUMENT = """
INSERT INTO index_documents (source_id, index_version, path, language, content)
VALUES (%(source_id)s, %(version)s, %(path)s, %(language)s, %(content)s)
ON CONFLICT (source_id, index_version, path)
DO UPDATE SET language = EXCLUDED.language, content = EXCLUDED.content
"""

_BUILD_DOCUMENTS = """
SELECT path, language, content FROM index_documents
WHERE source_id = %(source_id)s AND index_version = %(version)s
"""

_SYMBOL_CHUNKS = """
SELECT DISTINCT ON (path, symbol) id, path, symbol
FROM chunks
WHERE source_id = %(source_id)s AND index_version = %(version)s AND symbol IS NOT NULL
ORDER BY path, symbol, ordinal
"""

_INSERT_EDGE = """
INSERT INTO code_edges (source_id, index_version, from_chunk_id, to_chunk_id, relation)
VALUES (%(source_id)s, %(version)s, %(from_id)s, %(to_id)s, %(relation)s)
ON CONFLICT DO NOTHING
"""

_DROP_BUILD_DOCUMENTS = """
DELETE FROM index_documents WHERE source_id = %(source_id)s AND index_version = %(version)s
"""

_DROP_BUILD_CHUNKS = """
DELETE FROM chunks WHERE source_id = %(source_id)s AND index_version = %(version)s
"""


def replace_build_chunks(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    source_id: uuid.UUID,
    version: int,
    paths: Sequence[str],
    chunks: Sequence[NewChunk],
    model: str | None,
) -> None:
    """Make ``chunks`` what the open build ``version`` holds of the documents at ``paths``: the
    chunks an earlier batch stored for those paths go, so a batch sent again replaces itself.
    Loaded with one COPY into a temporary table and one INSERT, whatever the number of chunks
    (once per transaction: the table lives until the commit); a chunk with a vector is of
    ``model``."""
    where = {"source_id": source_id, "version": version}
    conn.execute(_REPLACE_PATHS, {**where, "paths": list(paths)})
    conn.execute(_CREATE_LOAD_TABLE)
    with conn.cursor() as cursor, cursor.copy(_COPY_LOAD) as copy:
        for chunk in chunks:
            copy.write_row(
                (
                    uuid.uuid4(),
                    chunk.ordinal,
                    chunk.path,
                    chunk.language,
                    chunk.symbol,
                    chunk.start_line,
                    chunk.end_line,
                    chunk.content,
                    chunk.content_sha256,
                    chunk.token_count,
                    chunk.search_text,
                    chunk.embedding,
                    Jsonb(chunk.metadata),
                )
            )
    conn.execute(_INSERT_FROM_LOAD, {**where, "org_id": org_id, "model": model})


def store_graph_document(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    version: int,
    path: str,
    language: str,
    content: str,
) -> None:
    """Keep a document of the build for its code graph, which publishing computes over the whole
    snapshot (:func:`graph_documents`); the same path again replaces it."""
    params = {"source_id": source_id, "version": version, "path": path}
    conn.execute(_STORE_DOCUMENT, {**params, "language": language, "content": content})


def graph_documents(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> list[Row]:
    """The documents the build keeps for its code graph (``path``, ``language``, ``content``)."""
    return conn.execute(_BUILD_DOCUMENTS, {"source_id": source_id, "version": version}).fetchall()


def symbol_chunks(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> list[Row]:
    """The first chunk of each (``path``, ``symbol``) of the build, with its ``id``."""
    return conn.execute(_SYMBOL_CHUNKS, {"source_id": source_id, "version": version}).fetchall()


def insert_edges(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    version: int,
    edges: Sequence[tuple[uuid.UUID, uuid.UUID, str]],
) -> None:
    """Store the build's code-graph edges (from chunk, to chunk, relation); one already stored
    is skipped."""
    where = {"source_id": source_id, "version": version}
    with conn.cursor() as cursor:
        cursor.executemany(
            _INSERT_EDGE,
            [
                {**where, "from_id": from_id, "to_id": to_id, "relation": relation}
                for from_id, to_id, relation in edges
            ],
        )


def drop_graph_documents(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> None:
    """Delete the documents a build kept for its code graph (once the graph is linked)."""
    conn.execute(_DROP_BUILD_DOCUMENTS, {"source_id": source_id, "version": version})


def discard_build(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> None:
    """Delete what an open build stored (its chunks, their edges, its documents), before the
    build is marked aborted."""
    where = {"source_id": source_id, "version": version}
    conn.execute(_DROP_BUILD_DOCUMENTS, where)
    conn.execute(_DROP_BUILD_CHUNKS, where)


# --- a served version's chunks, one path at a time (the memory API) ------------------------------

_DROP_PATH = """
DELETE FROM chunks WHERE source_id = %(source_id)s AND path = %(path)s
RETURNING token_count, embedding IS NOT NULL AS embedded
"""

_INSERT_SERVED_CHUNK = """
INSERT INTO chunks (org_id, source_id, index_version, ordinal, path, content, content_sha256,
                    token_count, tsv, embedding, embedding_model, metadata)
SELECT s.org_id, s.id, s.index_version, %(ordinal)s, %(path)s, %(content)s, %(sha256)s,
       %(token_count)s, to_tsvector('english', %(search_text)s), %(embedding)s,
       %(embedding_model)s, %(metadata)s
FROM sources s WHERE s.id = %(source_id)s AND s.index_version > 0
RETURNING token_count, embedding IS NOT NULL AS embedded
"""

# The served version's counters follow its chunks (one memory: one document, one chunk), and the
# source is marked changed: a memory's chunk is replaced within the one served version, so its
# updated_at is what tells a cached search that the source changed (retrieval/service.py).
# Counters first, then the source, the order a publish locks them in (:func:`publish_version`).
# The clock, not now(): two writes of one source wait for each other's row lock, so the later
# one always sets a later value, even when their transactions started at the same microsecond.
_ADD_TO_SERVED_COUNTS = """
WITH counted AS (
    UPDATE index_versions v
    SET document_count = document_count + %(chunks)s, chunk_count = chunk_count + %(chunks)s,
        token_count = token_count + %(tokens)s, embedded_count = embedded_count + %(embedded)s
    FROM sources s
    WHERE s.id = %(source_id)s AND v.source_id = s.id AND v.version = s.index_version
    RETURNING v.source_id
)
UPDATE sources SET updated_at = clock_timestamp() WHERE id IN (SELECT source_id FROM counted)
"""

# A memory's chunk carries the endpoint's vector for the context API's retrieval (none without
# an endpoint), as a write leaves it (memory/service.py).
_PATH_CHUNKS = """
SELECT id, path, embedding IS NOT NULL AS embedded
FROM chunks WHERE source_id = %(source_id)s AND path = ANY(%(paths)s)
"""


def replace_served_chunk(
    conn: psycopg.Connection, *, source_id: uuid.UUID, chunk: NewChunk, model: str | None
) -> None:
    """Make ``chunk`` the only chunk at its path in the source's served version (its vector, if
    any, of ``model``), keeping that version's counters right and marking the source changed."""
    _replace_path(conn, source_id=source_id, path=chunk.path, chunk=chunk, model=model)


def remove_served_chunk(conn: psycopg.Connection, *, source_id: uuid.UUID, path: str) -> None:
    """Remove the chunk at ``path``, keeping the served version's counters right and marking the
    source changed."""
    _replace_path(conn, source_id=source_id, path=path, chunk=None, model=None)


def _replace_path(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    path: str,
    chunk: NewChunk | None,
    model: str | None,
) -> None:
    where = {"source_id": source_id, "path": path}
    dropped = conn.execute(_DROP_PATH, where).fetchall()
    added = []
    if chunk is not None:
        params = {
            **where,
            "ordinal": chunk.ordinal,
            "content": chunk.content,
            "sha256": chunk.content_sha256,
            "token_count": chunk.token_count,
            "search_text": chunk.search_text,
            "embedding": chunk.embedding,
            "embedding_model": model if chunk.embedding is not None else None,
            "metadata": Jsonb(chunk.metadata),
        }
        added = conn.execute(_INSERT_SERVED_CHUNK, params).fetchall()

    def total(rows: list[Row], column: str) -> int:
        return sum(int(row[column]) for row in rows)

    _add_to_served_counts(
        conn,
        source_id=source_id,
        chunks=len(added) - len(dropped),
        tokens=total(added, "token_count") - total(dropped, "token_count"),
        embedded=total(added, "embedded") - total(dropped, "embedded"),
    )


def _add_to_served_counts(
    conn: psycopg.Connection, *, source_id: uuid.UUID, chunks: int, tokens: int, embedded: int
) -> None:
    params = {"source_id": source_id, "chunks": chunks, "tokens": tokens, "embedded": embedded}
    conn.execute(_ADD_TO_SERVED_COUNTS, params)


def store_path_embeddings(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    vectors: Mapping[str, list[float] | None],
    model: str | None,
) -> None:
    """Give the chunks at the paths of ``vectors`` their vector under ``model`` (None: no
    endpoint, so no vector), keeping the served version's embedded count right and marking the
    source changed."""
    rows = conn.execute(_PATH_CHUNKS, {"source_id": source_id, "paths": list(vectors)}).fetchall()
    store_embeddings(conn, [(row["id"], vectors[row["path"]]) for row in rows], model)
    embedded_now = sum(vectors[row["path"]] is not None for row in rows)
    embedded_before = sum(row["embedded"] for row in rows)
    _add_to_served_counts(
        conn, source_id=source_id, chunks=0, tokens=0, embedded=embedded_now - embedded_before
    )


# --- vectors --------------------------------------------------------------------------------------

_CREATE_EMBEDDING_LOAD = "CREATE TEMP TABLE embedding_load (id uuid NOT NULL, embedding real[])"
_COPY_EMBEDDINGS = "COPY embedding_load (id, embedding) FROM STDIN (FORMAT BINARY)"
_UPDATE_FROM_EMBEDDING_LOAD = """
UPDATE chunks SET embedding = load.embedding, embedding_model = %(model)s
FROM embedding_load AS load
WHERE chunks.id = load.id
"""
_DROP_EMBEDDING_LOAD = "DROP TABLE embedding_load"

# A vector of the same content stored under the model (and dimension, if given) in the source,
# or in one version of it: the indexer reuses the published version's for unchanged chunks, a
# re-embedding run any version's.
_EMBEDDINGS_BY_CONTENT = """
SELECT DISTINCT ON (c.content_sha256) c.content_sha256, c.embedding
FROM chunks c
WHERE c.source_id = %(source_id)s AND c.content_sha256 = ANY(%(hashes)s)
  AND c.embedding IS NOT NULL AND c.embedding_model = %(model)s
  AND (%(version)s::integer IS NULL OR c.index_version = %(version)s::integer)
  AND (%(dims)s::integer IS NULL OR c.embedding_dims = %(dims)s::integer)
"""

# --- re-embedding a source's published chunks (sources/reembed.py) ---
#: A stale chunk, for ``model`` and ``dims`` (NULL: any dimension).
_STALE = """
(c.embedding IS NULL OR c.embedding_model IS DISTINCT FROM %(model)s
 OR (%(dims)s::integer IS NOT NULL AND c.embedding_dims <> %(dims)s::integer))
"""

_STALE_SOURCES = f"""
SELECT s.org_id, s.id, s.name, s.classification, s.index_version AS version,
       count(c.id) FILTER (WHERE c.embedding IS NULL) AS unembedded,
       count(c.id) FILTER (WHERE c.embedding IS NOT NULL AND {_STALE}) AS other_model
FROM sources s
JOIN chunks c ON c.source_id = s.id AND c.index_version = s.index_version
WHERE s.index_version > 0
  AND (%(org_id)s::uuid IS NULL OR s.org_id = %(org_id)s::uuid)
  AND (%(source_id)s::uuid IS NULL OR s.id = %(source_id)s::uuid)
  AND NOT EXISTS (SELECT 1 FROM memory_projects m WHERE m.source_id = s.id)
GROUP BY s.org_id, s.id
ORDER BY s.org_id, s.created_at, s.id
"""

#: The next stale chunks of the version listed, while it is still the published one (a source
#: republished meanwhile was built with the ingest's own model: the run stops there).
_STALE_BATCH = f"""
SELECT c.id, c.content, c.content_sha256, c.embedding IS NULL AS unembedded
FROM chunks c JOIN sources s ON s.id = c.source_id AND c.index_version = s.index_version
WHERE s.id = %(source_id)s AND s.index_version = %(version)s AND {_STALE}
  AND (%(after)s::uuid IS NULL OR c.id > %(after)s::uuid)
ORDER BY c.id
LIMIT %(limit)s
"""

_CLEAR_OTHER_MODEL = f"""
UPDATE chunks c SET embedding = NULL, embedding_model = NULL
WHERE c.source_id = %(source_id)s AND c.index_version = %(version)s
  AND c.embedding IS NOT NULL AND {_STALE}
"""


def store_embeddings(
    conn: psycopg.Connection,
    rows: Sequence[tuple[uuid.UUID, list[float] | None]],
    model: str | None,
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


def embeddings_by_content(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    hashes: Sequence[bytes],
    model: str,
    version: int | None = None,
    dims: int | None = None,
) -> dict[bytes, list[float]]:
    """A vector of ``model`` (and ``dims``) per content hash the source holds one for, in
    ``version`` (None: any version)."""
    params = {
        "source_id": source_id,
        "hashes": list(hashes),
        "model": model,
        "version": version,
        "dims": dims,
    }
    rows = conn.execute(_EMBEDDINGS_BY_CONTENT, params).fetchall()
    return {bytes(row["content_sha256"]): row["embedding"] for row in rows}


def sources_with_stale_chunks(
    conn: psycopg.Connection,
    *,
    model: str,
    dimensions: int | None,
    org_id: uuid.UUID | None,
    source_id: uuid.UUID | None,
) -> list[Row]:
    """Every source but memory sources (of ``org_id``, or only ``source_id``; None: all) with
    chunks in its published version, oldest first, with how many of those have no vector
    (``unembedded``) and how many one of another model or dimension (``other_model``)."""
    params = {"model": model, "dims": dimensions, "org_id": org_id, "source_id": source_id}
    return conn.execute(_STALE_SOURCES, params).fetchall()


def stale_chunks(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    version: int,
    model: str,
    dimensions: int | None,
    after: uuid.UUID | None,
    limit: int,
) -> list[Row]:
    """Up to ``limit`` stale chunks of the source's published ``version`` after the chunk id
    ``after``, in id order (``id``, ``content``, ``content_sha256``, ``unembedded``); none once
    another version is published."""
    params = {
        "source_id": source_id,
        "version": version,
        "model": model,
        "dims": dimensions,
        "after": after,
        "limit": limit,
    }
    return conn.execute(_STALE_BATCH, params).fetchall()


def clear_other_model_embeddings(
    conn: psycopg.Connection,
    *,
    source_id: uuid.UUID,
    version: int,
    model: str,
    dimensions: int | None,
) -> int:
    """Remove the vectors of another model (or dimension) from the version's chunks; how many."""
    params = {"source_id": source_id, "version": version, "model": model, "dims": dimensions}
    return conn.execute(_CLEAR_OTHER_MODEL, params).rowcount


# --- delivered rows (retrieval/service.py) --------------------------------------------------------

# One table, no join with sources: planning the join cost 0.2 ms a retrieval (docs/decisions.md).
_CHUNKS_BY_ID = """
SELECT c.id, c.source_id, c.index_version, c.path, c.language, c.symbol, c.start_line,
       c.end_line, c.content, c.content_sha256, c.token_count, c.metadata
FROM chunks c
WHERE c.org_id = %(org_id)s AND c.id = ANY(%(ids)s)
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
    rows = conn.execute(_CHUNKS_BY_ID, {"org_id": org_id, "ids": ids}).fetchall()
    return {
        row["id"]: row for row in rows if versions.get(row["source_id"]) == row["index_version"]
    }
