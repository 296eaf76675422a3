"""SQL of the memory API: projects, entries and revisions. A memory's chunk, and its memory
source's index version, are written by their tables' owner (sources/store.py).

Every query is scoped by organisation or by a project space the caller already resolved within
its organisation. "Served" entries are those not deleted and with an accepted revision.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

Row = dict[str, Any]

# The space with the key (keys are unique per organisation), and its memory source: none when the
# source was deleted through the sources API since.
_PROJECT = """
SELECT s.id AS space_id, s.org_id, s.key, s.level, s.owner_user_id, p.source_id,
       COALESCE(p.review_required, false) AS review_required
FROM spaces s LEFT JOIN memory_projects p ON p.space_id = s.id AND p.org_id = s.org_id
WHERE s.org_id = %(org_id)s AND s.key = %(key)s
"""

# Serialises concurrent first writes of one key in one organisation.
_LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtextextended(%(org_id)s::text || '/' || %(key)s, 6))"

_INSERT_PROJECT = """
INSERT INTO memory_projects (space_id, org_id, source_id)
VALUES (%(space_id)s, %(org_id)s, %(source_id)s)
"""

_SERVED = "e.deleted_at IS NULL AND e.accepted_revision IS NOT NULL"

_MEMORY_COLUMNS = """
e.id, e.org_id, e.agent_key, e.access_count, e.last_accessed_at, e.created_at, e.updated_at,
r.type, r.content, r.confidence, r.importance, r.metadata
"""

_FROM_SERVED = f"""
memory_entries e
JOIN memory_revisions r ON r.entry_id = e.id AND r.revision = e.accepted_revision
WHERE e.space_id = %(space_id)s AND {_SERVED}
"""

_LIST = f"""
SELECT {_MEMORY_COLUMNS}
FROM {_FROM_SERVED}
  AND (%(type)s::text IS NULL OR r.type = %(type)s)
  AND (%(agent)s::text IS NULL OR e.agent_key = %(agent)s)
  AND (%(q)s::text IS NULL OR strpos(lower(r.content), lower(%(q)s)) > 0)
ORDER BY e.created_at DESC, e.id DESC
LIMIT %(limit)s OFFSET %(offset)s
"""

_BY_IDS = f"SELECT {_MEMORY_COLUMNS} FROM {_FROM_SERVED} AND e.id = ANY(%(ids)s)"

# The newest ``limit`` served entries, packed into one row so that 10,000 candidates arrive as two
# byte strings numpy reads without a Python loop: the ids, and one fixed-size record per entry
# (CANDIDATE_RECORD; float8send/int4send are big-endian). A single aggregation pass feeds every
# aggregate the same rows in the same order: position i is the same entry in each. ``compatible``
# says whether the entry's vector is of the given provider and dimension; the vectors themselves
# come from ``_VECTORS``, for the entries the caller does not hold yet.
_CANDIDATES = """
WITH newest AS (
    SELECT id, created_at, updated_at, access_count, importance, token_count,
           (embedding_provider = %(provider)s AND length(embedding_f32) = %(vector_bytes)s)
               IS TRUE AS compatible
    FROM memory_entries
    WHERE space_id = %(space_id)s AND deleted_at IS NULL AND accepted_revision IS NOT NULL
    ORDER BY created_at DESC, id DESC
    LIMIT %(limit)s
)
SELECT count(*) AS n,
       COALESCE(string_agg(id, ' '), '') AS ids,
       COALESCE(string_agg(
           float8send(date_part('epoch', created_at)) || float8send(date_part('epoch', updated_at))
           || float8send(importance) || int4send(access_count) || int4send(token_count)
           || int8send(('x' || substr(id, 5))::bit(48)::bigint)
           || CASE WHEN compatible THEN %(yes)s ELSE %(no)s END, ''), '') AS records
FROM newest
"""

# Vectors (little-endian float32, as stored) with the updated_at they belong to, of the provider
# and dimension asked for: of the given entries, or (many missing, as on a cold start) of the
# newest ``limit`` served entries, which one range scan reads faster than 10,000 id lookups.
_VECTORS_SELECT = """
SELECT COALESCE(string_agg(id, ' '), '') AS ids,
       COALESCE(string_agg(float8send(date_part('epoch', updated_at)), ''), '') AS updated_at,
       COALESCE(string_agg(embedding_f32, ''), '') AS vectors
"""
_VECTORS = f"""
{_VECTORS_SELECT}
FROM memory_entries
WHERE space_id = %(space_id)s AND id = ANY(%(ids)s)
  AND embedding_provider = %(provider)s AND length(embedding_f32) = %(vector_bytes)s
"""
_NEWEST_VECTORS = f"""
WITH newest AS (
    SELECT id, updated_at, embedding_f32, embedding_provider
    FROM memory_entries
    WHERE space_id = %(space_id)s AND deleted_at IS NULL AND accepted_revision IS NOT NULL
    ORDER BY created_at DESC, id DESC
    LIMIT %(limit)s
)
{_VECTORS_SELECT}
FROM newest
WHERE embedding_provider = %(provider)s AND length(embedding_f32) = %(vector_bytes)s
"""

_READ_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"

#: One candidate's fixed-size record in ``_CANDIDATES``' ``records``.
CANDIDATE_RECORD = np.dtype(
    [
        ("created_at", ">f8"),
        ("updated_at", ">f8"),
        ("importance", ">f8"),
        ("access_count", ">i4"),
        ("token_count", ">i4"),
        # the id's 12 hex digits as a number: orders like the id, and sorts fast
        ("id_number", ">i8"),
        ("compatible", "?"),
    ]
)

_SET_REVIEW = """
UPDATE memory_projects SET review_required = %(required)s WHERE space_id = %(space_id)s
"""

# A new entry is served once its first revision is accepted. Created at the clock's time, not the
# transaction's: the memories of one batch write are then ordered as written ("newest first" lists
# the last item first), as separate writes would be.
_INSERT_ENTRY = """
INSERT INTO memory_entries (id, org_id, space_id, agent_key, accepted_revision, latest_revision,
                            created_at, updated_at)
SELECT %(id)s, %(org_id)s, %(space_id)s, %(agent_key)s, NULL, 0, t, t FROM clock_timestamp() AS t
ON CONFLICT (id) DO NOTHING
"""

_INSERT_REVISION = """
WITH entry AS (
    UPDATE memory_entries SET latest_revision = %(revision)s WHERE id = %(entry_id)s
)
INSERT INTO memory_revisions (entry_id, revision, type, content, confidence, importance, metadata,
                              state, author_user_id)
VALUES (%(entry_id)s, %(revision)s, %(type)s, %(content)s, %(confidence)s, %(importance)s,
        %(metadata)s, 'pending', %(author)s)
"""

_REVISION = """
SELECT r.revision, r.state, r.type, r.content, r.confidence, r.importance, r.metadata,
       e.agent_key, e.accepted_revision
FROM memory_revisions r JOIN memory_entries e ON e.id = r.entry_id
WHERE e.id = %(id)s AND e.space_id = %(space_id)s AND e.deleted_at IS NULL
  AND r.revision = %(revision)s
FOR UPDATE OF e
"""

_LOCK_ENTRY = f"""
SELECT e.id, e.agent_key, e.accepted_revision, e.latest_revision, r.type, r.content,
       r.confidence, r.importance, r.metadata
FROM {_FROM_SERVED} AND e.id = %(id)s
FOR UPDATE OF e
"""

# Accepting a revision supersedes the one served so far and every older proposal.
_ACCEPT = """
UPDATE memory_revisions
SET state = CASE WHEN revision = %(revision)s THEN 'accepted' ELSE 'superseded' END,
    accepted_at = CASE WHEN revision = %(revision)s THEN now() ELSE accepted_at END,
    accepted_by = CASE WHEN revision = %(revision)s THEN %(accepted_by)s ELSE accepted_by END
WHERE entry_id = %(entry_id)s
  AND (revision = %(revision)s OR state = 'accepted'
       OR (state = 'pending' AND revision < %(revision)s))
"""

# The dedupe key is derived from the revision row itself, so it cannot disagree with what is served.
# A memory is never updated before it was created: its first write (in a batch, created after the
# transaction began) has updated_at = created_at, as the spec's example shows.
_SERVE = """
UPDATE memory_entries e
SET accepted_revision = %(revision)s, updated_at = greatest(now(), e.created_at),
    importance = %(importance)s, token_count = %(token_count)s,
    embedding_f32 = %(embedding_f32)s, embedding_provider = %(embedding_provider)s,
    dedupe_key = memory_dedupe_key(r.type, r.content)
FROM memory_revisions r
WHERE e.id = %(entry_id)s AND r.entry_id = e.id AND r.revision = %(revision)s
"""

# Each new memory's dedupe key (migration 0018 defines it), in the order given, with the oldest live
# entry of the project that has it: one round trip for a whole batch.
_DEDUPE_MATCHES = f"""
SELECT i.ord, memory_dedupe_key(i.type, i.content) AS key, m.id AS match
FROM unnest(%(types)s::text[], %(contents)s::text[]) WITH ORDINALITY AS i(type, content, ord)
LEFT JOIN LATERAL (
    SELECT e.id FROM memory_entries e
    WHERE e.space_id = %(space_id)s AND {_SERVED}
      AND e.dedupe_key = memory_dedupe_key(i.type, i.content)
    ORDER BY e.created_at, e.id
    LIMIT 1
) m ON true
ORDER BY i.ord
"""

# Also a memory still waiting for its first accepted revision: deleting withdraws the proposal.
_DELETE = """
UPDATE memory_entries SET deleted_at = now(), deleted_by = %(user)s
WHERE id = %(id)s AND space_id = %(space_id)s AND deleted_at IS NULL
"""

_ACCESS = f"""
UPDATE memory_entries e
SET access_count = access_count + 1, last_accessed_at = clock_timestamp()
WHERE e.id = %(id)s AND e.space_id = %(space_id)s AND {_SERVED}
"""

_REVISIONS = """
SELECT r.revision, r.state, r.type, r.content, r.confidence, r.importance, r.metadata,
       r.author_user_id, r.created_at, r.accepted_at
FROM memory_revisions r JOIN memory_entries e ON e.id = r.entry_id
WHERE e.id = %(id)s AND e.space_id = %(space_id)s AND e.deleted_at IS NULL
ORDER BY r.revision
"""


# --- re-embedding (memory/reembed.py) ------------------------------------------------------------
# A served entry is stale when its vector is not of the given provider: another model or dimension,
# or none at all. Written as ranges on either side of the provider (and NULL), which are index
# range scans of memory_entries_provider (migration 0020); ``IS DISTINCT FROM`` is not.
_STALE = """
(e.embedding_provider IS NULL OR e.embedding_provider < %(provider)s
 OR e.embedding_provider > %(provider)s)
"""

# The projects with stale entries, and how many each holds (of one organisation, or of all).
_STALE_PROJECTS = f"""
SELECT p.org_id, p.space_id, p.source_id, s.key, count(*) AS stale
FROM memory_entries e
JOIN memory_projects p ON p.space_id = e.space_id
JOIN spaces s ON s.id = p.space_id AND s.org_id = p.org_id
WHERE e.deleted_at IS NULL AND e.accepted_revision IS NOT NULL AND {_STALE}
  AND (%(org_id)s::uuid IS NULL OR p.org_id = %(org_id)s)
  AND (%(space_id)s::uuid IS NULL OR p.space_id = %(space_id)s)
GROUP BY p.org_id, p.space_id, p.source_id, s.key
ORDER BY p.org_id, s.key
"""

# Up to ``limit`` stale entries of one project with their served content, locked: a second worker
# (the CLI beside the background job) skips them and takes the next ones instead of waiting, and a
# write to one of them waits for this batch, then embeds its own new content.
_STALE_BATCH = f"""
SELECT e.id, r.content
FROM memory_entries e
JOIN memory_revisions r ON r.entry_id = e.id AND r.revision = e.accepted_revision
WHERE e.space_id = %(space_id)s AND e.deleted_at IS NULL AND e.accepted_revision IS NOT NULL
  AND {_STALE}
LIMIT %(limit)s
FOR UPDATE OF e SKIP LOCKED
"""

# A new vector for the same content: updated_at stays, so recency (and the spec's "reading does
# not mutate" view of a memory) is unchanged; the provider is what tells /relevant and the vector
# cache that the vector is now of this model.
_REEMBED = """
UPDATE memory_entries e
SET embedding_f32 = v.embedding_f32, embedding_provider = %(provider)s
FROM unnest(%(ids)s::text[], %(vectors)s::bytea[]) AS v(id, embedding_f32)
WHERE e.id = v.id
"""


def project(conn: psycopg.Connection, *, org_id: uuid.UUID, key: str) -> Row | None:
    return conn.execute(_PROJECT, {"org_id": org_id, "key": key}).fetchone()


def lock_project_key(conn: psycopg.Connection, *, org_id: uuid.UUID, key: str) -> None:
    conn.execute(_LOCK_KEY, {"org_id": org_id, "key": key})


def insert_project(
    conn: psycopg.Connection, *, org_id: uuid.UUID, space_id: uuid.UUID, source_id: uuid.UUID
) -> None:
    """Register a project's new memory source."""
    conn.execute(_INSERT_PROJECT, {"space_id": space_id, "org_id": org_id, "source_id": source_id})


def list_memories(
    conn: psycopg.Connection,
    *,
    space_id: uuid.UUID,
    type: str | None,
    agent: str | None,
    q: str | None,
    limit: int,
    offset: int,
) -> list[Row]:
    params = {
        "space_id": space_id,
        "type": type,
        "agent": agent,
        "q": q,
        "limit": limit,
        "offset": offset,
    }
    return conn.execute(_LIST, params).fetchall()


def memories_by_ids(conn: psycopg.Connection, *, space_id: uuid.UUID, ids: list[str]) -> list[Row]:
    return conn.execute(_BY_IDS, {"space_id": space_id, "ids": ids}).fetchall()


@dataclass(frozen=True)
class Candidates:
    """The newest served entries of a project as arrays, position i being the same entry."""

    ids: np.ndarray  # str
    created_at: np.ndarray  # epoch seconds
    updated_at: np.ndarray  # epoch seconds
    access_count: np.ndarray
    importance: np.ndarray
    token_count: np.ndarray
    id_number: np.ndarray
    #: whether the entry's vector is of the provider and dimension asked for
    compatible: np.ndarray


def read_snapshot(conn: psycopg.Connection) -> None:
    """Make the transaction (before its first query) read one snapshot, and nothing else."""
    conn.execute(_READ_SNAPSHOT)


def candidates(
    conn: psycopg.Connection,
    *,
    space_id: uuid.UUID,
    limit: int,
    provider: str | None,
    dimensions: int,
) -> Candidates:
    """The newest ``limit`` served entries (``provider`` None: none counts as compatible)."""
    params = {
        "space_id": space_id,
        "limit": limit,
        "provider": provider,
        "vector_bytes": 4 * dimensions,
        "yes": b"\x01",
        "no": b"\x00",
    }
    row = conn.execute(_CANDIDATES, params, binary=True).fetchone()  # raw bytea, no hex
    assert row is not None
    records = np.frombuffer(row["records"], dtype=CANDIDATE_RECORD)
    return Candidates(
        ids=np.array(row["ids"].split(" ") if row["n"] else [], dtype=str),
        created_at=records["created_at"],
        updated_at=records["updated_at"],
        access_count=records["access_count"],
        importance=records["importance"],
        token_count=records["token_count"],
        id_number=records["id_number"],
        compatible=records["compatible"],
    )


def vectors(
    conn: psycopg.Connection,
    *,
    space_id: uuid.UUID,
    provider: str,
    dimensions: int,
    ids: list[str] | None = None,
    newest: int | None = None,
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Vectors of ``provider`` with ``dimensions`` of the entries ``ids``, or of the ``newest``
    served entries: the ids found, their ``updated_at`` (epoch seconds) and vectors (one row
    each)."""
    params = {
        "space_id": space_id,
        "ids": ids,
        "limit": newest,
        "provider": provider,
        "vector_bytes": 4 * dimensions,
    }
    query = _VECTORS if ids is not None else _NEWEST_VECTORS
    row = conn.execute(query, params, binary=True).fetchone()
    assert row is not None
    found = row["ids"].split(" ") if row["ids"] else []
    matrix = np.frombuffer(row["vectors"], dtype="<f4").reshape(len(found), dimensions)
    return found, np.frombuffer(row["updated_at"], dtype=">f8").astype(np.float64), matrix


def insert_entry(
    conn: psycopg.Connection,
    *,
    entry_id: str,
    org_id: uuid.UUID,
    space_id: uuid.UUID,
    agent_key: str | None,
) -> bool:
    """False when the id is taken (the caller draws another)."""
    params = {"id": entry_id, "org_id": org_id, "space_id": space_id, "agent_key": agent_key}
    return conn.execute(_INSERT_ENTRY, params).rowcount == 1


def insert_revision(
    conn: psycopg.Connection, *, entry_id: str, revision: int, fields: Row, author: str
) -> None:
    """Add ``revision`` as a pending one (the entry's latest)."""
    conn.execute(
        _INSERT_REVISION,
        {
            "entry_id": entry_id,
            "revision": revision,
            "type": fields["type"],
            "content": fields["content"],
            "confidence": fields["confidence"],
            "importance": fields["importance"],
            "metadata": Jsonb(fields["metadata"]),
            "author": author,
        },
    )


def revision_for_update(
    conn: psycopg.Connection, *, space_id: uuid.UUID, entry_id: str, revision: int
) -> Row | None:
    """One revision of a live entry, the entry locked."""
    params = {"space_id": space_id, "id": entry_id, "revision": revision}
    return conn.execute(_REVISION, params).fetchone()


def accept_revision(
    conn: psycopg.Connection,
    *,
    entry_id: str,
    revision: int,
    importance: float,
    embedding_f32: bytes | None,
    embedding_provider: str | None,
    token_count: int,
    accepted_by: str,
) -> None:
    """Serve ``revision``: it is accepted, the previously accepted one and older pending ones are
    superseded, and the entry carries its scoring inputs."""
    conn.execute(_ACCEPT, {"entry_id": entry_id, "revision": revision, "accepted_by": accepted_by})
    conn.execute(
        _SERVE,
        {
            "entry_id": entry_id,
            "revision": revision,
            "importance": importance,
            "token_count": token_count,
            "embedding_f32": embedding_f32,
            "embedding_provider": embedding_provider,
        },
    )


def dedupe_matches(
    conn: psycopg.Connection, *, space_id: uuid.UUID, items: list[tuple[str, str]]
) -> list[tuple[bytes, str | None]]:
    """For each (type, content), in order: its dedupe key and the oldest live entry of the
    project with that key (None: no match)."""
    params = {
        "space_id": space_id,
        "types": [memory_type for memory_type, _ in items],
        "contents": [content for _, content in items],
    }
    rows = conn.execute(_DEDUPE_MATCHES, params).fetchall()
    return [(bytes(row["key"]), row["match"]) for row in rows]


def set_review_required(conn: psycopg.Connection, *, space_id: uuid.UUID, required: bool) -> None:
    conn.execute(_SET_REVIEW, {"space_id": space_id, "required": required})


def lock_entry(conn: psycopg.Connection, *, space_id: uuid.UUID, entry_id: str) -> Row | None:
    return conn.execute(_LOCK_ENTRY, {"space_id": space_id, "id": entry_id}).fetchone()


def delete_entry(
    conn: psycopg.Connection, *, space_id: uuid.UUID, entry_id: str, user: str
) -> bool:
    params = {"space_id": space_id, "id": entry_id, "user": user}
    return conn.execute(_DELETE, params).rowcount == 1


def record_access(conn: psycopg.Connection, *, space_id: uuid.UUID, entry_id: str) -> bool:
    return conn.execute(_ACCESS, {"space_id": space_id, "id": entry_id}).rowcount == 1


def revisions(conn: psycopg.Connection, *, space_id: uuid.UUID, entry_id: str) -> list[Row]:
    return conn.execute(_REVISIONS, {"space_id": space_id, "id": entry_id}).fetchall()


@dataclass(frozen=True)
class StaleProject:
    """A project holding served entries whose vector is not of the configured provider."""

    org_id: uuid.UUID
    space_id: uuid.UUID
    source_id: uuid.UUID
    key: str
    stale: int


def stale_projects(
    conn: psycopg.Connection,
    *,
    provider: str,
    org_id: uuid.UUID | None = None,
    space_id: uuid.UUID | None = None,
) -> list[StaleProject]:
    """The projects (of ``org_id``, or only ``space_id``; None: every one) with entries whose
    vector is not of ``provider``, and how many."""
    params = {"provider": provider, "org_id": org_id, "space_id": space_id}
    return [StaleProject(**row) for row in conn.execute(_STALE_PROJECTS, params).fetchall()]


def lock_stale_batch(
    conn: psycopg.Connection, *, space_id: uuid.UUID, provider: str, limit: int
) -> list[Row]:
    """Up to ``limit`` stale entries of the project (id, content), locked for this transaction;
    entries another transaction holds are skipped."""
    params = {"space_id": space_id, "provider": provider, "limit": limit}
    return conn.execute(_STALE_BATCH, params).fetchall()


def store_vectors(
    conn: psycopg.Connection, *, provider: str, vectors: dict[str, np.ndarray]
) -> None:
    """Give entries new unit vectors of ``provider`` (their content and revision unchanged)."""
    ids = list(vectors)
    conn.execute(
        _REEMBED,
        {
            "provider": provider,
            "ids": ids,
            "vectors": [vectors[i].astype("<f4").tobytes() for i in ids],
        },
    )
