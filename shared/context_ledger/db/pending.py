"""A statement sent now and read later, so that independent reads share one round trip.

Inside ``conn.pipeline()`` psycopg sends a statement without waiting for its answer, and the first
read of any answer flushes everything queued before it: reads that do not depend on each other,
sent first and read after the statement the work is waiting for, travel together. Outside a
pipeline a pending read is simply a statement run at once and read when asked.

    with conn.pipeline():
        policy = pending_policy(conn, org_id=org_id)  # sent, not waited for
        spaces = search_spaces(conn, ...)  # its read flushes both
        policy.result()  # already here
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.rows import dict_row

T = TypeVar("T")


class Pending(Generic[T]):
    """A sent statement's cursor and how to turn its rows into the value asked for (read once,
    then kept)."""

    def __init__(self, cursor: psycopg.Cursor[Any], read: Callable[[psycopg.Cursor[Any]], T]):
        self._cursor = cursor
        self._read = read
        self._value: tuple[T] | None = None

    def result(self) -> T:
        if self._value is None:
            self._value = (self._read(self._cursor),)
        return self._value[0]


def send(
    conn: psycopg.Connection,
    query: str,
    params: dict[str, Any],
    read: Callable[[psycopg.Cursor[Any]], T],
) -> Pending[T]:
    """Send ``query``; ``read`` gets its cursor, whose rows are dicts whatever the connection's
    row factory."""
    return Pending(conn.cursor(row_factory=dict_row).execute(query, params), read)
