"""Run a loopback stand-in HTTP server on a background thread for the length of a block."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from socketserver import BaseServer


@contextmanager
def serving_in_background(server: BaseServer, *, name: str) -> Iterator[None]:
    """Serve ``server`` on a daemon thread while in the block; then shut it down and close it.

    A short poll interval makes shutdown quick: tests start and stop stand-ins often.
    """
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
