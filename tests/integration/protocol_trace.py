"""Round trips a connection made, counted from libpq's trace of its protocol messages.

The client waits for the server at each message that asks the server for its answers: a ``Sync``
(the end of a statement, or of a pipeline), a ``Flush`` other than the one psycopg sends right
after a pipeline's ``Sync`` (a read inside a pipeline), and a simple ``Query``. Answers can
arrive while a pipeline is still being sent (the server sends what it has whenever it waits for
more input), so the order of the lines does not tell the waits apart; these messages do.
Statements sent together in a pipeline and synchronised once count one round trip, however many
there are.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg import pq


@dataclass
class Trace:
    """What the traced connection exchanged; filled in when the block ends."""

    round_trips: int = 0
    sent: list[str] = field(default_factory=list)  # frontend message types, in order


#: A message's first line: direction, length, type. A statement's text may go on over more lines.
_MESSAGE = re.compile(r"^([FB])\t\d+\t(\w+)", re.MULTILINE)


def count(trace: str) -> Trace:
    result = Trace()
    for direction, message in _MESSAGE.findall(trace):
        if direction != "F":
            continue
        after_sync = bool(result.sent) and result.sent[-1] == "Sync"
        if message in ("Sync", "Query") or (message == "Flush" and not after_sync):
            result.round_trips += 1
        result.sent.append(message)
    return result


@contextmanager
def traced(conn: psycopg.Connection) -> Iterator[Trace]:
    """Trace ``conn`` for the block."""
    result = Trace()
    with tempfile.TemporaryFile("w+") as out:
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield result
        finally:
            conn.pgconn.untrace()  # flushes libpq's buffer into the file
            out.seek(0)
            counted = count(out.read())
            result.round_trips, result.sent = counted.round_trips, counted.sent
