"""Migrations apply to an empty database, are idempotent, and refuse edited history."""

from __future__ import annotations

import secrets

import psycopg
import pytest

from context_ledger.db.migrate import MigrationError, available_migrations, migrate
from context_ledger.local.postgres import ensure_database

EXPECTED_TABLES = {
    "organisations",
    "spaces",
    "grants",
    "api_keys",
    "sources",
    "index_versions",
    "chunks",
    "code_edges",
    "evidence_chain",
    "evidence_chain_heads",
    "evidence_checkpoints",
    "attributions",
    "attribution_links",
    "model_logs",
    "memory_entries",
    "memory_revisions",
}


@pytest.fixture
def empty_database(pg_server_uri: str):
    name = f"ctxl_empty_{secrets.token_hex(4)}"
    url = ensure_database(pg_server_uri, name)
    yield url
    with psycopg.connect(pg_server_uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {row[0] for row in rows}


def test_migrations_apply_to_an_empty_database(empty_database: str) -> None:
    applied = migrate(empty_database)

    assert [m.version for m in applied] == [m.version for m in available_migrations()]
    assert _tables(empty_database) >= EXPECTED_TABLES


def test_running_migrations_twice_applies_nothing_the_second_time(empty_database: str) -> None:
    migrate(empty_database)

    assert migrate(empty_database) == []


def test_an_applied_migration_that_changed_is_refused(empty_database: str) -> None:
    migrate(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")

    with pytest.raises(MigrationError, match="was changed after it was applied"):
        migrate(empty_database)


def test_evidence_chain_rows_cannot_be_updated_or_deleted(empty_database: str) -> None:
    migrate(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO evidence_chain (chain, seq, record_id, category, record, key_id,"
            " prev_mac, mac) VALUES ('main', 1, gen_random_uuid(), 'test', '\\x00', 'k',"
            " '\\x00', '\\x00')"
        )
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute("UPDATE evidence_chain SET category = 'tampered'")
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute("DELETE FROM evidence_chain")


def test_migration_18_keys_the_memories_written_before_it_for_dedupe(empty_database: str) -> None:
    # GIVEN a database at migration 17 holding a served, a pending and a deleted memory
    migrate(empty_database)
    with psycopg.connect(empty_database, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE memory_entries DROP COLUMN dedupe_key;"
            " DROP FUNCTION memory_dedupe_key(text, text);"
            " DELETE FROM schema_migrations WHERE version = 18"
        )
        org = conn.execute("INSERT INTO organisations (name) VALUES ('Acme') RETURNING id")
        org_id = org.fetchone()[0]
        space = conn.execute(
            "INSERT INTO spaces (org_id, level, name) VALUES (%s, 'organisation', 'Acme')"
            " RETURNING id",
            (org_id,),
        )
        space_id = space.fetchone()[0]
        for memory_id, accepted, deleted in (
            ("ctx_000000000001", 1, False),
            ("ctx_000000000002", None, False),
            ("ctx_000000000003", 1, True),
        ):
            conn.execute(
                "INSERT INTO memory_entries (id, org_id, space_id, accepted_revision,"
                " latest_revision, deleted_at) VALUES (%s, %s, %s, %s, 1,"
                " CASE WHEN %s THEN now() END)",
                (memory_id, org_id, space_id, accepted, deleted),
            )
            conn.execute(
                "INSERT INTO memory_revisions (entry_id, revision, type, content, state,"
                " author_user_id) VALUES (%s, 1, 'decision', ' We use  POSTGRES ', %s, 'root')",
                (memory_id, "accepted" if accepted else "pending"),
            )

    # WHEN migration 18 is applied to it
    applied = migrate(empty_database)

    # THEN every entry with an accepted revision has the key a new write of it would get
    assert [m.version for m in applied] == [18]
    with psycopg.connect(empty_database) as conn:
        rows = conn.execute(
            "SELECT id, dedupe_key = memory_dedupe_key('decision', 'we use postgres')"
            " FROM memory_entries ORDER BY id"
        ).fetchall()
    assert rows == [
        ("ctx_000000000001", True),
        ("ctx_000000000002", None),
        ("ctx_000000000003", True),
    ]


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        ("We use Postgres.", "  we   USE postgres. ", True),
        ("a\u00a0b\u2003c\td\ne", "a b c d e", True),  # Unicode White_Space, not only ASCII
        ("ÉCOLE", "école", True),
        ("We use Postgres.", "We use Postgres!", False),
        ("ab", "a b", False),
    ],
)
def test_the_dedupe_key_folds_whitespace_and_case_only(
    empty_database: str, one: str, other: str, same: bool
) -> None:
    migrate(empty_database)
    with psycopg.connect(empty_database) as conn:
        equal, across_types = conn.execute(
            "SELECT memory_dedupe_key('fact', %s) = memory_dedupe_key('fact', %s),"
            " memory_dedupe_key('fact', %s) = memory_dedupe_key('decision', %s)",
            (one, other, one, one),
        ).fetchone()
    assert (equal, across_types) == (same, False)
