"""The process-wide psycopg 3 connection pool.

In Lambda the pool lives as long as the execution environment, so a warm function reuses its
connections. The connection string comes from ``DATABASE_URL`` or, in AWS, from the Aurora
secret in Secrets Manager (``KEYSTONE_DATABASE_SECRET_ARN``).

When the database goes away (a restart, a failover) a request must fail fast and the service
recover by itself. So a checkout waits at most ``KEYSTONE_DB_POOL_TIMEOUT_SECONDS`` (psycopg_pool's
default is 30 s, the whole API Gateway budget), and a connection is checked with an empty query
as it is handed out (``ConnectionPool.check_connection``, one round trip) unless it was checked
within the last second and the server has sent nothing on it since: a connection the server
closed while it sat idle in the pool is replaced instead of failing the first requests after a
restart. And the pool gives up a failing connection attempt after that same timeout
(``reconnect_timeout``; psycopg_pool's default is 5 minutes of attempts 1, 2, 4, 8... s apart),
so the next request starts a fresh attempt at once: without it, a server back after an 8 s
outage was only reconnected to about 5 s later. :func:`is_unavailable` tells such failures from
a query's own errors; the HTTP apps answer them ``503 service_unavailable`` (``http/app.py``).
"""

from __future__ import annotations

import functools
import json
import math
import select
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from context_ledger.settings import Settings, get_settings


def _conninfo_from_secret(secret_arn: str) -> str:
    """Build a connection string from an RDS-managed secret (host, port, username, ...)."""
    import boto3  # imported here: only AWS deployments read the secret

    raw = boto3.client("secretsmanager").get_secret_value(SecretId=secret_arn)["SecretString"]
    secret = json.loads(raw)
    return make_conninfo(
        host=secret["host"],
        port=secret.get("port", 5432),
        user=secret["username"],
        password=secret["password"],
        dbname=secret.get("dbname", "postgres"),
        sslmode="require",
    )


def resolve_conninfo(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    if settings.database_secret_arn:
        return _conninfo_from_secret(settings.database_secret_arn)
    raise RuntimeError(
        "no database configured: set DATABASE_URL (the local runtime and tests start an "
        "embedded PostgreSQL and set it for you)"
    )


#: See :class:`_RecentlyChecked`.
RECHECK_AFTER_SECONDS = 1.0


def _configure(conn: psycopg.Connection) -> None:
    conn.row_factory = dict_row  # type: ignore[assignment]


#: Server-side states of a database that is going away or not yet accepting connections:
#: admin_shutdown, crash_shutdown, cannot_connect_now (SQLSTATE class 57); class 08 is the
#: connection exceptions.
_UNAVAILABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot be reached (down, restarting, the connection
    lost, no connection within the pool timeout), as opposed to a statement's own failure
    (a statement or lock timeout is also an OperationalError, with a SQLSTATE of its own)."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _UNAVAILABLE_SQLSTATES


class _RecentlyChecked:
    """The pool's check on checkout (``ConnectionPool.check_connection``, an empty query),
    skipped for a connection checked less than :data:`RECHECK_AFTER_SECONDS` ago on which the
    server has sent nothing since.

    A request takes two or three connections within milliseconds (the rate limit, its own, the
    vector search's), often the same one again, and each check is a round trip (0.15 ms of a
    0.18 ms checkout here). A server that shuts down or fails over tells its idle sessions so,
    or closes their sockets: either makes the socket readable, and the connection is checked."""

    def __init__(self) -> None:
        self._checked_at: weakref.WeakKeyDictionary[psycopg.Connection, float] = (
            weakref.WeakKeyDictionary()
        )

    def __call__(self, conn: psycopg.Connection) -> None:
        now = time.monotonic()
        recent = now - self._checked_at.get(conn, -math.inf) < RECHECK_AFTER_SECONDS
        if recent and not select.select([conn.fileno()], [], [], 0)[0]:
            return
        ConnectionPool.check_connection(conn)
        self._checked_at[conn] = now


@functools.cache
def get_pool() -> ConnectionPool:
    settings = get_settings()
    pool = ConnectionPool(
        resolve_conninfo(settings),
        min_size=settings.db_pool_min_size,
        max_size=settings.db_pool_max_size,
        configure=_configure,
        check=_RecentlyChecked(),
        timeout=settings.db_pool_timeout_seconds,
        reconnect_timeout=settings.db_pool_timeout_seconds,
        open=True,
        name="context-ledger",
    )
    try:
        pool.wait(timeout=settings.db_pool_timeout_seconds)
    except PoolTimeout:
        pool.close()  # not cached: the next call tries again with a new pool
        raise
    return pool


def close_pool() -> None:
    """Close the pool (tests and the local runtime, when the database goes away)."""
    if get_pool.cache_info().currsize:
        get_pool().close()
        get_pool.cache_clear()


@contextmanager
def connection() -> Iterator[psycopg.Connection]:
    """A pooled connection inside a transaction: committed on success, rolled back on error."""
    with get_pool().connection() as conn:
        yield conn


@contextmanager
def autocommit(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """``conn`` in autocommit mode for the block, then back in the mode it was in.

    For statements that commit on their own on a connection outside a transaction (a pooled
    one): each round trip is its own implicit transaction, without the BEGIN and COMMIT of
    psycopg's transactional mode, and the connection stays idle. A connection that broke
    meanwhile cannot change mode and is left as it is: the pool discards it when it comes back.
    """
    previous = conn.autocommit
    conn.autocommit = True
    try:
        yield conn
    finally:
        if conn.info.transaction_status is TransactionStatus.IDLE:
            conn.autocommit = previous


#: How long spare_connection waits: psycopg_pool refuses at once a timeout of 0, even with a
#: connection ready; a millisecond takes a ready one and leaves growing the pool to the next call.
SPARE_WAIT_SECONDS = 0.001


@contextmanager
def spare_connection() -> Iterator[psycopg.Connection | None]:
    """A second pooled connection for work that can run beside the request's own (one search
    statement beside the other), or None when none is free right now: the caller then does the
    work on its own connection. It never waits for one, so a busy pool costs nothing; a pool
    below its maximum starts growing and the next request gets it. Outside a transaction: what
    runs on it commits on its own."""
    pool = get_pool()
    try:
        conn = pool.getconn(timeout=SPARE_WAIT_SECONDS)
    except PoolTimeout:
        yield None
        return
    try:
        yield conn
    finally:
        pool.putconn(conn)
