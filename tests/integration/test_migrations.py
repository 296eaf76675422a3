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
