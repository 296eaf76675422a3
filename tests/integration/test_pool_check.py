"""The pool's check on checkout (db/pool.py): skipped for a connection checked within the last
second, unless the server has said something on it since (a shutdown, a terminated session)."""

from __future__ import annotations

import time

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from context_ledger.db import connection
from context_ledger.db.pool import RECHECK_AFTER_SECONDS, _RecentlyChecked


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[psycopg.Connection]:
    """The connections psycopg_pool's own check ran on."""
    ran: list[psycopg.Connection] = []
    original = ConnectionPool.check_connection

    def counting(conn: psycopg.Connection) -> None:
        ran.append(conn)
        original(conn)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(counting))
    return ran


def test_a_connection_checked_just_now_is_handed_out_unchecked(database_url, checks) -> None:
    check = _RecentlyChecked()
    with psycopg.connect(database_url) as conn:
        check(conn)
        check(conn)
        conn.execute("SELECT 1")
        check(conn)
    assert len(checks) == 1


def test_a_connection_is_checked_again_after_a_second(database_url, checks, monkeypatch) -> None:
    check = _RecentlyChecked()
    now = time.monotonic()
    with psycopg.connect(database_url) as conn:
        check(conn)
        monkeypatch.setattr(time, "monotonic", lambda: now + RECHECK_AFTER_SECONDS + 0.1)
        check(conn)
    assert len(checks) == 2


def test_a_session_the_server_ended_is_checked_and_fails_at_once(database_url, checks) -> None:
    check = _RecentlyChecked()
    with psycopg.connect(database_url) as conn, psycopg.connect(database_url) as admin:
        check(conn)
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        time.sleep(0.2)  # the server's goodbye reaches the socket
        with pytest.raises(psycopg.OperationalError):
            check(conn)
    assert len(checks) == 2


def test_the_pool_replaces_a_session_ended_right_after_its_last_use(db) -> None:
    with connection() as conn:
        pid = conn.info.backend_pid
    with psycopg.connect(db, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    time.sleep(0.2)
    with connection() as conn:
        assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
        assert conn.info.backend_pid != pid
