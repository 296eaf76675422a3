"""``db.autocommit``: statements on a connection outside a transaction, each committing on its
own; the connection is handed back in the mode it came in, unless it broke meanwhile."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from context_ledger.db import autocommit


@pytest.mark.parametrize("mode", [False, True], ids=["transactional", "autocommit"])
def test_statements_commit_on_their_own_and_the_mode_comes_back(database_url, mode) -> None:
    with (
        psycopg.connect(database_url, autocommit=mode) as conn,
        psycopg.connect(database_url, autocommit=True) as other,
    ):
        table = f"autocommit_probe_{int(mode)}"
        other.execute(f"DROP TABLE IF EXISTS {table}")
        with autocommit(conn):
            conn.execute(f"CREATE TABLE {table} (n int)")
            conn.execute(f"INSERT INTO {table} VALUES (1)")
            assert conn.info.transaction_status is TransactionStatus.IDLE
            # committed already: another session sees the row
            assert other.execute(f"SELECT count(*) FROM {table}").fetchone() == (1,)
        assert conn.autocommit is mode
        other.execute(f"DROP TABLE {table}")


def test_a_connection_that_broke_inside_keeps_its_error(database_url) -> None:
    with (
        psycopg.connect(database_url) as conn,
        psycopg.connect(database_url, autocommit=True) as other,
    ):
        other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(psycopg.OperationalError), autocommit(conn):
            conn.execute("SELECT 1")
        assert conn.info.transaction_status is not TransactionStatus.IDLE
