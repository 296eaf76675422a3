"""Starting and stopping the local commands without leaving anything behind.

- :func:`port_in_use`: ``context-ledger dev`` checks its port before it starts anything, so a port
  taken by another server is one line, not a started database and a traceback.
- :func:`ended_by_signals`: ``SIGTERM`` and ``SIGHUP`` end a command the way Ctrl-C does, with an
  exception, so ``finally`` blocks and ``atexit`` handlers run. Python's default for them is to die
  on the spot, and the embedded PostgreSQL is stopped by an ``atexit`` handler (local/postgres.py):
  a ``kill`` while ``dev`` was starting left the server it had just started running.
"""

from __future__ import annotations

import errno
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

#: What ends a command like Ctrl-C does: ``kill``'s default and a closed terminal.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether another socket holds ``host:port`` (binding it as the local server does, with
    ``SO_REUSEADDR``: a port whose last connections are in ``TIME_WAIT`` is free)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


class TerminatedError(SystemExit):
    """The process was asked to end by a signal; exits with the shell's status for it."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)


@contextmanager
def ended_by_signals() -> Iterator[None]:
    """Within the block, :data:`ENDING_SIGNALS` raise :class:`TerminatedError` in the main
    thread (``local.runtime.serve`` takes ``SIGTERM`` over while it serves, to stop cleanly)."""

    def end(signum: int, frame: FrameType | None) -> None:
        raise TerminatedError(signum)

    previous = {sig: signal.signal(sig, end) for sig in ENDING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
