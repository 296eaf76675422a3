"""Every chunk carries its space's level (migration 0017), which the pgvector backend's
per-level HNSW indexes are partial on: set on every insert whatever the writer, and backfilled
for the chunks a deployment held before."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import psycopg
import pytest

from context_ledger.db.migrate import available_migrations
from context_ledger.local.postgres import ensure_database

# An organisation with a team below it, a docs source in each, and two chunks per source.
_SEED = """
WITH org AS (INSERT INTO organisations (name) VALUES ('Levels') RETURNING id),
root AS (
    INSERT INTO spaces (org_id, level, name) SELECT id, 'organisation', 'Levels' FROM org
    RETURNING id, org_id
),
team AS (
    INSERT INTO spaces (org_id, level, name, parent_id) SELECT org_id, 'team', 'Team', id
    FROM root RETURNING id, org_id
),
source AS (
    INSERT INTO sources (org_id, space_id, kind, name)
    SELECT org_id, id, 'docs', 'org docs' FROM root
    UNION ALL SELECT org_id, id, 'docs', 'team docs' FROM team
    RETURNING id, org_id, name
),
version AS (
    INSERT INTO index_versions (source_id, version, state) SELECT id, 1, 'building' FROM source
    RETURNING source_id
)
INSERT INTO chunks (org_id, source_id, index_version, ordinal, path, content, content_sha256,
                    token_count, tsv)
SELECT source.org_id, source.id, 1, n, source.name, 'chunk ' || n,
       sha256(convert_to('chunk ' || n, 'UTF8')), 2, to_tsvector('simple', 'chunk ' || n)
FROM source JOIN version ON version.source_id = source.id, generate_series(1, 2) AS n
"""

_LEVELS = "SELECT path, space_level FROM chunks ORDER BY path"


@pytest.fixture
def scratch_url(pg_server_uri: str) -> Iterator[str]:
    name = f"ctxl_levels_{secrets.token_hex(4)}"
    yield ensure_database(pg_server_uri, name)
    with psycopg.connect(pg_server_uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _apply(conn: psycopg.Connection, *, up_to: int, after: int = 0) -> None:
    for migration in available_migrations():
        if after < migration.version <= up_to:
            conn.execute(migration.sql)


def test_chunks_of_before_the_migration_get_their_space_level(scratch_url: str) -> None:
    with psycopg.connect(scratch_url, autocommit=True) as conn:
        _apply(conn, up_to=16)
        conn.execute(_SEED)

        _apply(conn, after=16, up_to=17)

        rows = conn.execute(_LEVELS).fetchall()
    assert rows == [
        ("org docs", "organisation"),
        ("org docs", "organisation"),
        ("team docs", "team"),
        ("team docs", "team"),
    ]


def test_the_migration_drops_the_indexes_of_every_level_at_once(scratch_url: str) -> None:
    with psycopg.connect(scratch_url, autocommit=True) as conn:
        _apply(conn, up_to=16)
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            pytest.skip("no pgvector in this server")
        conn.execute(
            "CREATE INDEX chunks_embedding_hnsw_half_8 ON chunks"
            " USING hnsw ((embedding_vector::halfvec(8)) halfvec_cosine_ops)"
            " WHERE embedding_dims = 8"
        )

        _apply(conn, after=16, up_to=17)

        names = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes")}
    assert "chunks_embedding_hnsw_half_8" not in names, "rebuilt per level by the next search"


def test_a_new_chunk_gets_its_space_level_whatever_the_insert_says(db: str) -> None:
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(_SEED)
        # A writer that names a level gets its space's all the same.
        conn.execute(
            "INSERT INTO chunks (org_id, source_id, index_version, ordinal, path, content,"
            " content_sha256, token_count, tsv, space_level)"
            " SELECT org_id, source_id, 1, 9, 'claims team', 'x', sha256('x'), 1, ''::tsvector,"
            " 'personal' FROM chunks WHERE path = 'team docs' LIMIT 1"
        )
        rows = conn.execute(
            "SELECT c.path, c.space_level FROM chunks c JOIN organisations o ON o.id = c.org_id"
            " WHERE o.name = 'Levels' ORDER BY c.path, c.ordinal"
        ).fetchall()
    assert [level for path, level in rows if path == "claims team"] == ["team"]
    assert {(path, level) for path, level in rows} == {
        ("org docs", "organisation"),
        ("team docs", "team"),
        ("claims team", "team"),
    }
