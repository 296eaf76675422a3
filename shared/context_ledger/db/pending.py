"""A statement sent now and read later, so that independent reads share one round trip.

Inside ``conn.pipeline()`` psycopg sends each statement without waiting for its answer, and the
block's end synchronises them all: one round trip for everything sent in it, when every pending
read is read after the block. A read inside the block costs a round trip of its own (psycopg asks
the server to flush what it has), and the block's end a second one; so read inside only what a
later statement of the block depends on. Outside a pipeline a pending read is simply a statement
run at once and read when asked.

    with conn.pipeline():
        policy = pending_policy(conn, org_id=org_id)  # sent, not waited for
        spaces = pending_search_spaces(conn, ...)  # sent too
    policy.result(), spaces.result()  # both came back in the block's one round trip
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.rows import dict_row

T = TypeVar("T")


class Pending(Generic[T]):
    """A value read when first asked for, then kept: a sent statement's rows made into what the
    caller wants, or something made of other pending values."""

    def __init__(self, read: Callable[[], T]):
        self._read = read
        self._value: tuple[T] | None = None

    def result(self) -> T:
        if self._value is None:
            self._value = (self._read(),)
        return self._value[0]


def send(
    conn: psycopg.Connection,
    query: str,
    params: dict[str, Any],
    read: Callable[[psycopg.Cursor[Any]], T],
) -> Pending[T]:
    """Send ``query``; ``read`` gets its cursor, whose rows are dicts whatever the connection's
    row factory."""
    cursor = conn.cursor(row_factory=dict_row).execute(query, params)
    return Pending(lambda: read(cursor))
