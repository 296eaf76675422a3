"""Vector storage on a real PostgreSQL: exact cosine in SQL, pgvector's HNSW, and a migration
that succeeds where pgvector cannot be created."""

from __future__ import annotations

import math
import random
import secrets
import struct
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from context_ledger.db.migrate import available_migrations, migrate
from context_ledger.search.vectors import (
    PgvectorUnavailableError,
    ensure_vector_index,
    pgvector_available,
    vector_search_sql,
)
from context_ledger.sources.store import store_embeddings
from context_ledger.spaces.levels import Level

# One organisation, space, source and index version, then ``count`` chunks without embeddings.
_SEED_CHUNKS = """
WITH org AS (INSERT INTO organisations (name) VALUES ('Vectors') RETURNING id),
space AS (
    INSERT INTO spaces (org_id, level, name) SELECT id, 'organisation', 'Vectors' FROM org
    RETURNING id, org_id
),
source AS (
    INSERT INTO sources (org_id, space_id, kind, name) SELECT org_id, id, 'docs', 'docs' FROM space
    RETURNING id, org_id
),
version AS (
    INSERT INTO index_versions (source_id, version, state) SELECT id, 1, 'building' FROM source
    RETURNING source_id
)
INSERT INTO chunks (org_id, source_id, index_version, ordinal, path, content, content_sha256,
                    token_count, tsv)
SELECT source.org_id, source.id, 1, n, 'doc.md', 'chunk ' || n,
       sha256(convert_to('chunk ' || n, 'UTF8')), 2, to_tsvector('simple', 'chunk ' || n)
FROM source, version, generate_series(1, %(count)s) AS n
RETURNING id, ordinal
"""


def _seed_chunks(conn: psycopg.Connection, count: int) -> list[uuid.UUID]:
    rows = conn.execute(_SEED_CHUNKS, {"count": count}).fetchall()
    return [chunk_id for chunk_id, _ in sorted(rows, key=lambda row: row[1])]


def _random_vectors(count: int, dims: int, seed: int) -> list[list[float]]:
    """Gaussian vectors rounded to float32, so Python holds exactly what real[] stores."""
    rng = random.Random(seed)
    flat = [rng.gauss(0, 1) for _ in range(count * dims)]
    flat = list(struct.unpack(f"{len(flat)}f", struct.pack(f"{len(flat)}f", *flat)))
    return [flat[i * dims : (i + 1) * dims] for i in range(count)]


def _reference_cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


@pytest.fixture
def conn(db: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(db, autocommit=True) as connection:
        yield connection


# --- exact backend ---------------------------------------------------------------------------


def test_sql_cosine_similarity_equals_a_double_precision_reference_within_1e_6(
    conn: psycopg.Connection,
) -> None:
    ids = _seed_chunks(conn, 50)
    vectors = _random_vectors(51, 384, seed=1)
    query, stored = vectors[0], vectors[1:]
    store_embeddings(conn, list(zip(ids, stored, strict=True)), "test-model")

    rows = conn.execute(
        "SELECT id, cosine_similarity(embedding, %s::real[]) FROM chunks", (query,)
    ).fetchall()

    expected = {i: _reference_cosine(query, v) for i, v in zip(ids, stored, strict=True)}
    assert len(rows) == 50
    for chunk_id, similarity in rows:
        assert similarity == pytest.approx(expected[chunk_id], abs=1e-6)


def test_sql_cosine_similarity_is_null_for_different_lengths_or_a_zero_vector(
    conn: psycopg.Connection,
) -> None:
    row = conn.execute(
        "SELECT cosine_similarity('{1,0}', '{1,0,0}'), cosine_similarity('{0,0}', '{1,1}'),"
        " cosine_similarity('{1,1}', '{2,2}')"
    ).fetchone()

    assert row[:2] == (None, None)
    assert row[2] == pytest.approx(1.0)


def test_store_embeddings_fills_the_array_model_dimension_and_vector_columns(
    conn: psycopg.Connection,
) -> None:
    first, second, untouched = _seed_chunks(conn, 3)

    updated = store_embeddings(conn, [(first, [0.5, -1.0, 2.0]), (second, [1.0] * 4)], "m-1")

    assert updated == 2
    rows = conn.execute(
        "SELECT id, embedding, embedding_model, embedding_dims, embedding_vector::text"
        " FROM chunks ORDER BY ordinal"
    ).fetchall()
    assert rows == [
        (first, [0.5, -1.0, 2.0], "m-1", 3, "[0.5,-1,2]"),
        (second, [1.0] * 4, "m-1", 4, "[1,1,1,1]"),
        (untouched, None, None, None, None),
    ]


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf"), 1.0]])
def test_an_embedding_pgvector_would_refuse_is_refused_by_both_backends(
    conn: psycopg.Connection, bad: list[float]
) -> None:
    [chunk_id] = _seed_chunks(conn, 1)

    # With pgvector its generated column refuses first; without it, the CHECK constraint does.
    with pytest.raises((psycopg.errors.DataException, psycopg.errors.CheckViolation)):
        store_embeddings(conn, [(chunk_id, bad)], "m-1")


# --- pgvector backend ------------------------------------------------------------------------


@pytest.fixture
def hnsw_64(conn: psycopg.Connection) -> Iterator[list[str]]:
    """The HNSW indexes for 64 dimensions, one per level, dropped afterwards (the session
    database is shared)."""
    names = ensure_vector_index(conn, 64)
    yield names
    for name in names:
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))


def test_the_level_hnsw_index_serves_the_query_and_finds_the_exact_top_10(
    conn: psycopg.Connection, hnsw_64: list[str]
) -> None:
    ids = _seed_chunks(conn, 400)
    vectors = _random_vectors(400, 64, seed=2)
    # Chunks of another dimension share the table; the partial index and predicate skip them.
    store_embeddings(conn, [(ids[0], [1.0] * 8), (ids[1], [0.5] * 8)], "small-model")
    store_embeddings(conn, list(zip(ids[2:], vectors[2:], strict=True)), "m-64")
    conn.execute("ANALYZE chunks")
    query = _random_vectors(1, 64, seed=3)[0]
    search = vector_search_sql(64, Level.ORGANISATION)
    nearest = sql.SQL(
        "SELECT id FROM chunks WHERE {predicate} ORDER BY {distance} LIMIT 10"
    ).format(predicate=search.predicate, distance=search.distance)
    exact = (
        "SELECT id FROM chunks ORDER BY cosine_similarity(embedding, %s::real[]) DESC NULLS LAST"
        " LIMIT 10"
    )

    with conn.transaction():
        # A few hundred rows are cheap to scan, so make the planner show it can use the index.
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL hnsw.ef_search = 100")
        plan = "\n".join(
            row[0] for row in conn.execute(sql.SQL("EXPLAIN ") + nearest, {"query_vector": query})
        )
        approximate = [row[0] for row in conn.execute(nearest, {"query_vector": query})]

    assert "Index Scan using chunks_embedding_hnsw_half_64_organisation " in plan
    assert approximate == [row[0] for row in conn.execute(exact, (query,))]


def test_ensuring_the_indexes_twice_creates_one_index_per_level(
    conn: psycopg.Connection, hnsw_64: list[str]
) -> None:
    assert ensure_vector_index(conn, 64) == hnsw_64

    definitions = dict(
        conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes"
            " WHERE tablename = 'chunks' AND indexname = ANY(%s)",
            (hnsw_64,),
        ).fetchall()
    )
    assert sorted(definitions) == sorted(f"chunks_embedding_hnsw_half_64_{lv}" for lv in Level)
    for level in Level:
        definition = definitions[f"chunks_embedding_hnsw_half_64_{level}"]
        assert "USING hnsw (((embedding_vector)::halfvec(64)) halfvec_cosine_ops)" in definition
        assert f"WHERE ((embedding_dims = 64) AND (space_level = '{level}'::text))" in definition


def test_migration_0011_drops_full_precision_indexes_and_keeps_half_precision_ones(
    conn: psycopg.Connection, hnsw_64: list[str]
) -> None:
    conn.execute(
        "CREATE INDEX chunks_embedding_hnsw_32 ON chunks"
        " USING hnsw ((embedding_vector::vector(32)) vector_cosine_ops) WHERE embedding_dims = 32"
    )
    [migration] = [m for m in available_migrations() if m.version == 11]

    conn.execute(migration.sql)

    names = {
        r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")
    }
    assert "chunks_embedding_hnsw_32" not in names, "rebuilt in half precision by the next search"
    assert set(hnsw_64) <= names


@pytest.mark.parametrize("dimensions", [0, 4001])
def test_hnsw_refuses_dimensions_pgvector_cannot_index(
    conn: psycopg.Connection, dimensions: int
) -> None:
    with pytest.raises(ValueError, match="1 to 4000"):
        ensure_vector_index(conn, dimensions)


# --- the migration where pgvector cannot be created ------------------------------------------


@pytest.fixture
def plain_role_database(pg_server_uri: str) -> Iterator[tuple[str, str]]:
    """A database owned by a role that is no superuser: (its URL, the server's superuser URL).

    pgvector is not a trusted extension, so this role gets insufficient_privilege from
    CREATE EXTENSION vector, like an application role on a managed PostgreSQL.
    """
    role, password = f"ctxl_plain_{secrets.token_hex(4)}", secrets.token_hex(16)
    name = f"ctxl_plain_{secrets.token_hex(4)}"
    with psycopg.connect(pg_server_uri, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
        admin.execute(
            sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(name), sql.Identifier(role)
            )
        )
    try:
        yield (
            make_conninfo(pg_server_uri, dbname=name, user=role, password=password),
            make_conninfo(pg_server_uri, dbname=name),
        )
    finally:
        with psycopg.connect(pg_server_uri, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_migrations_succeed_without_the_right_to_create_pgvector_and_exact_search_works(
    plain_role_database: tuple[str, str],
) -> None:
    url, _ = plain_role_database

    applied = migrate(url)

    assert [m.version for m in applied] == [m.version for m in available_migrations()]
    with psycopg.connect(url, autocommit=True) as conn:
        assert (
            conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None
        )
        assert not pgvector_available(conn)
        with pytest.raises(PgvectorUnavailableError):
            ensure_vector_index(conn, 64)
        [chunk_id] = _seed_chunks(conn, 1)
        with pytest.raises(psycopg.errors.CheckViolation, match="chunks_embedding_shape"):
            store_embeddings(conn, [(chunk_id, [1.0, float("nan")])], "m-2")
        store_embeddings(conn, [(chunk_id, [3.0, 4.0])], "m-2")
        similarity = conn.execute(
            "SELECT cosine_similarity(embedding, '{4,3}') FROM chunks"
        ).fetchone()[0]
    assert similarity == pytest.approx(24 / 25)


def test_a_plain_role_gets_the_vector_column_when_a_superuser_created_pgvector_first(
    plain_role_database: tuple[str, str],
) -> None:
    url, superuser_url = plain_role_database
    with psycopg.connect(superuser_url, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")

    migrate(url)

    with psycopg.connect(url, autocommit=True) as conn:
        assert pgvector_available(conn)
