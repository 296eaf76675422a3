"""The database going away under the process-wide pool (``db/pool.py``): checkouts fail fast with
an error the HTTP apps answer 503, and the pool recovers by itself once the server is back.

A PostgreSQL server of its own (not the session's, which other tests share) is stopped and started
again. The HTTP answer is in tests/api/test_db_outage_api.py.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from evidence_support import key_ring_from_env
from psycopg_pool import PoolTimeout

from context_ledger.attribution import writer
from context_ledger.cooldown import Cooldown
from context_ledger.db import close_pool, connection, get_pool
from context_ledger.db.pool import is_unavailable
from context_ledger.local.postgres import (
    ensure_database,
    start_embedded_again,
    stop_embedded,
)
from context_ledger.settings import get_settings

POOL_TIMEOUT_SECONDS = 1.5


@pytest.fixture
def outage_pool(own_server: object, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process-wide pool on the outage server: one connection, the test's checkout timeout."""
    url = ensure_database(own_server.get_uri(), "outage")  # type: ignore[attr-defined]
    close_pool()
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("KEYSTONE_DB_POOL_MIN", "1")
    monkeypatch.setenv("KEYSTONE_DB_POOL_MAX", "1")
    monkeypatch.setenv("KEYSTONE_DB_POOL_TIMEOUT_SECONDS", str(POOL_TIMEOUT_SECONDS))
    get_settings.cache_clear()
    try:
        yield
    finally:
        close_pool()
        monkeypatch.undo()
        get_settings.cache_clear()


def backend_pid() -> int:
    with connection() as conn:
        return conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]


def test_a_stopped_database_fails_the_checkout_fast_and_the_first_one_after_it_is_back_works(
    own_server: object, outage_pool: None
) -> None:
    before = backend_pid()
    stop_embedded(own_server)
    try:
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError) as failed:
            backend_pid()
        elapsed = time.monotonic() - started
    finally:
        start_embedded_again(own_server)

    assert is_unavailable(failed.value)
    # psycopg_pool's own default would be 30 s: the configured checkout timeout bounded it.
    assert elapsed < POOL_TIMEOUT_SECONDS * 10
    # The pool's idle connection died with the server; the check on checkout replaces it, so
    # the first checkout after the restart already works (no process restart either).
    assert backend_pid() != before


def test_a_database_back_after_a_long_outage_is_reconnected_to_at_once(
    own_server: object, outage_pool: None
) -> None:
    """Checkouts during the outage leave the pool retrying with a doubling backoff (1, 2, 4 s
    apart); it gives up after the checkout timeout, so the first checkout after the restart
    starts a fresh attempt instead of waiting for the next scheduled one."""
    assert get_pool().reconnect_timeout == POOL_TIMEOUT_SECONDS
    backend_pid()
    stop_embedded(own_server)
    try:
        with pytest.raises(PoolTimeout):
            backend_pid()
        time.sleep(POOL_TIMEOUT_SECONDS * 1.5)  # the outage goes on; the pool's attempts fail
    finally:
        start_embedded_again(own_server)
    assert backend_pid() > 0


def test_a_connection_lost_mid_transaction_is_an_outage(
    own_server: object, outage_pool: None
) -> None:
    with connection() as conn:
        conn.execute("SELECT 1")
        stop_embedded(own_server)
        try:
            with pytest.raises(psycopg.OperationalError) as lost:
                conn.execute("SELECT 1")  # the server ended this session
        finally:
            start_embedded_again(own_server)
    assert is_unavailable(lost.value)
    assert backend_pid() > 0


def test_the_checkout_waits_the_configured_timeout(outage_pool: None) -> None:
    assert get_pool().timeout == POOL_TIMEOUT_SECONDS
    held = pytest.raises(PoolTimeout, match=f"after {POOL_TIMEOUT_SECONDS:.2f} sec")
    with get_pool().connection(), held as busy:  # the only connection, held
        get_pool().getconn()
    assert is_unavailable(busy.value)


def test_a_statement_error_is_not_an_outage() -> None:
    assert is_unavailable(psycopg.OperationalError("connection is bad"))
    assert is_unavailable(psycopg.errors.AdminShutdown("terminating connection"))
    assert is_unavailable(psycopg.errors.CannotConnectNow("the database system is starting up"))
    assert not is_unavailable(psycopg.errors.QueryCanceled("statement timeout"))
    assert not is_unavailable(psycopg.errors.LockNotAvailable("lock timeout"))
    assert not is_unavailable(psycopg.errors.UndefinedTable("no such table"))
    assert not is_unavailable(ValueError("not a database error"))


def test_the_writer_fails_a_batch_fast_after_one_record_found_the_database_down(
    own_server: object, outage_pool: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One checkout waits the pool timeout; the records after it fail at once, for redelivery."""
    checkouts: list[int] = []
    real_connection = writer.connection
    monkeypatch.setattr(writer, "connection", lambda: (checkouts.append(1), real_connection())[1])
    monkeypatch.setattr(writer, "_database_down", Cooldown())
    records = [
        SQSRecord({"messageId": f"m{i}", "body": json.dumps(_event()), "attributes": {}})
        for i in range(3)
    ]
    failures: list[Exception] = []
    with key_ring_from_env(
        monkeypatch,
        KEYSTONE_EVIDENCE_HMAC_KEY="outage-test-key-" + "o" * 32,
        KEYSTONE_EVIDENCE_KEY_ID="outage-1",
        KEYSTONE_EVIDENCE_HMAC_SECRET_ARN=None,
    ):
        stop_embedded(own_server)
        try:
            for record in records:
                with pytest.raises(Exception) as raised:  # noqa: PT011 (checked below)
                    writer.record_handler(record)
                failures.append(raised.value)
        finally:
            start_embedded_again(own_server)

    assert is_unavailable(failures[0])
    assert all(isinstance(f, writer.DatabaseDownError) for f in failures[1:])
    assert failures[1].status == 503
    assert len(checkouts) == 1, "only the first record waited for a connection"


def _event() -> dict:
    return {
        "recordId": str(uuid.uuid4()),
        "category": "context_attribution",
        "orgId": str(uuid.uuid4()),
        "record": {
            "requestId": "req-1",
            "attributionId": str(uuid.uuid4()),
            "userId": "user-1",
            "spaceId": str(uuid.uuid4()),
            "sourceIds": [str(uuid.uuid4())],
        },
    }
