"""Numbered SQL migrations and the runner that applies them.

Migrations are ``NNNN_name.sql`` files in ``migrations/``, applied in order, each in its own
transaction, and recorded with a checksum in ``schema_migrations``. A changed file that was already
applied is an error: write a new migration instead. A session-level advisory lock lets several
runners (a deploy's custom resource, a developer's CLI) start at once safely.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import psycopg

_LOCK_KEY = 0x6C6564676572  # "ledger": one advisory lock for the migration runner
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(RuntimeError):
    """A migration file is malformed or an applied one was changed."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available_migrations() -> list[Migration]:
    """The migration files shipped with the package, in order."""
    found = []
    for entry in resources.files("context_ledger.db").joinpath("migrations").iterdir():
        match = _FILE.match(entry.name)
        if match is None:
            if entry.name.endswith(".sql"):
                raise MigrationError(f"migration file name not NNNN_name.sql: {entry.name}")
            continue
        found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError("two migration files share a number")
    return found


def migrate(conninfo: str) -> list[Migration]:
    """Apply every pending migration; return the ones applied by this call."""
    applied_now: list[Migration] = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            conn.execute(_CREATE_TABLE)
            done = dict(conn.execute("SELECT version, checksum FROM schema_migrations").fetchall())
            for migration in available_migrations():
                if migration.version in done:
                    if done[migration.version] != migration.checksum:
                        raise MigrationError(
                            f"migration {migration.version:04d}_{migration.name} was changed "
                            "after it was applied; add a new migration instead"
                        )
                    continue
                with conn.transaction():
                    conn.execute(migration.sql)
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name, checksum)"
                        " VALUES (%s, %s, %s)",
                        (migration.version, migration.name, migration.checksum),
                    )
                applied_now.append(migration)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied_now
