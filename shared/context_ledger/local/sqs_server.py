"""moto's SQS on loopback over kept-alive HTTP/1.1: the local runtime's and the benchmarks' queue.

moto's own server (``ThreadedMotoServer``: werkzeug's development server in front of a dispatcher
for every AWS service) answers each request with ``Connection: close``, so every ``send_message``
opens a new TCP connection and a new server thread, and it finds the service by scanning moto's
package on every request. A real SQS endpoint keeps the connection botocore reuses and does
neither: on this machine a publish took 5.3-5.4 ms p50 through moto's server and 3.6-3.7 through
this one, whose difference would otherwise be counted as the retrieve handler's own cost
(bench/retrieve.py prints both). Only the transport differs: the queues, messages and answers
are moto's SQS application's, and moto keeps them in this process (a test that also runs
moto's server sees the same queues).

Requests need a ``Content-Length`` (botocore always sends one); a chunked body is refused with
``411``. Tests keep moto's full server (tests/conftest.py): they also reach its Secrets Manager and
S3.
"""

from __future__ import annotations

import io
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from context_ledger.local.serving import serving_in_background

#: How long a refused request's connection is drained before it is closed.
_LINGER_SECONDS = 1.0

#: Headers about the connection rather than the answer: the server sets its own.
_HOP_BY_HOP = frozenset({"connection", "content-length", "keep-alive", "transfer-encoding"})


class SqsServer(ThreadingHTTPServer):
    """A loopback HTTP server whose every request goes to moto's SQS application."""

    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import create_backend_app

        super().__init__(("127.0.0.1", port), _Handler)
        self.app = create_backend_app("sqs")
        self.connections = 0  # accepted so far: a kept-alive client opens one
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The endpoint to configure as ``AWS_ENDPOINT_URL_SQS``."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            self.connections += 1
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def server_close(self) -> None:
        """Also end the kept-alive connections, whose threads would otherwise wait for their
        clients' next request for as long as the clients live."""
        super().server_close()
        with self._lock:
            still_open = list(self._open)
        for connection in still_open:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    server: SqsServer
    protocol_version = "HTTP/1.1"  # keep-alive, as botocore reuses connections
    # Without it each answer's body waits ~40 ms for Nagle's algorithm and a delayed ACK.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        # Named, so a thread dump (or a test) tells this server's connections from others'.
        threading.current_thread().name = f"sqs:{self.server.server_address[1]}"
        super().setup()

    def _serve(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.send_error(411, "a Content-Length is required")
            self._discard_what_the_client_still_sends()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        answer: list[Any] = []
        written: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
            answer[:] = [status, headers]  # nothing is sent before the application returns
            return written.append

        chunks = self.server.app(self._environ(body), start_response)
        try:
            content = b"".join([*written, *chunks])
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        status, headers = answer
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def _discard_what_the_client_still_sends(self) -> None:
        """Close the way a careful server does after refusing a request it did not read: stop
        sending, then read and drop whatever the client still sends, until it closes (at most
        :data:`_LINGER_SECONDS`). Closed at once, the socket would answer the unread body with a
        reset, which fails the client's writes and can destroy the answer before it is read."""
        self.wfile.flush()
        deadline = time.monotonic() + _LINGER_SECONDS
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
            while (left := deadline - time.monotonic()) > 0:
                self.connection.settimeout(left)
                if not self.connection.recv(65536):
                    return

    def _environ(self, body: bytes) -> dict[str, Any]:
        """The WSGI environ of the request (PEP 3333)."""
        path, _, query = self.path.partition("?")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path, encoding="latin-1"),
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "SERVER_NAME": self.server.server_address[0],
            "SERVER_PORT": str(self.server.server_address[1]),
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in self.headers.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                environ[key] = value
        return environ

    # SQS's protocols are all POST; GET answers moto's own errors rather than http.server's.
    do_POST = do_GET = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: one line per publish would drown the local runtime's log."""


@contextmanager
def serve_sqs(port: int = 0) -> Iterator[SqsServer]:
    """moto's SQS on ``127.0.0.1:port`` (0: any free port) while in the block."""
    server = SqsServer(port)
    with serving_in_background(server, name="sqs"):
        yield server
