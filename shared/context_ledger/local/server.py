"""The HTTP front door: a threaded stdlib server on loopback that hands requests to the gateway.

Bodies over 10 MB are refused with ``413`` (HTTP APIs' payload limit) before they are read.
Hop-by-hop and length headers from a function's answer are replaced by the server's own.

A thread serves each connection, so slow clients are bounded, not trusted
(``KEYSTONE_LOCAL_*`` settings):

- at most ``local_max_connections`` connections are served at once. The one after them waits in
  the accept loop (the rest in the listen backlog), as Go's ``netutil.LimitListener`` has it; if
  no connection ends within the header timeout, it is answered ``503`` with ``Retry-After`` and
  closed, so a full server says so rather than hanging its clients.
- each request's line and headers must arrive within ``local_header_timeout_seconds`` of the
  moment the server waits for them (a new connection, or a kept-alive one after its last
  answer), however slowly they trickle in: a connection that sent part of a request is answered
  ``408``, an idle one is closed without a word (its client may be about to reuse it).
- the body must arrive within ``local_body_timeout_seconds`` of the headers (``408``), and an
  answer must be taken within as long.

Deadlines, not per-read timeouts: a slowloris sending a byte every few seconds never trips a
socket timeout, so every read of the connection (``_DeadlineReader``) gets only what is left of
the current deadline.
"""

from __future__ import annotations

import io
import logging
import socket
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from context_ledger.local.events import HttpRequest, HttpResponse
from context_ledger.local.gateway import Gateway
from context_ledger.settings import get_settings

logger = logging.getLogger(__name__)

#: API Gateway HTTP APIs refuse payloads over 10 MB.
MAX_BODY_BYTES = 10 * 1024 * 1024
_SERVER_HEADERS = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive"})
#: How often the accept loop, waiting for a free connection slot, checks for shutdown.
_SLOT_POLL_SECONDS = 0.1


class _BodyTooLargeError(Exception):
    """The request body is over the limit."""


class _DeadlineReader(io.RawIOBase):
    """The connection's bytes, each read allowed only what is left of ``deadline``."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection
        self.deadline = float("inf")
        self.received = 0
        self.timed_out = False

    def start(self, seconds: float) -> None:
        """A new phase (headers, body) with its own deadline."""
        self.deadline = time.monotonic() + seconds
        self.received = 0
        self.timed_out = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError("the deadline passed")
            self._connection.settimeout(left)
            count = self._connection.recv_into(buffer)
        except TimeoutError:
            self.timed_out = True
            raise
        self.received += count
        return count


def _raw(response: HttpResponse) -> bytes:
    """An answer written straight to the socket, where no request was parsed to answer through
    the handler's own writing: the 503 of a connection over the cap, the 408 of partial headers."""
    lines = [f"HTTP/1.1 {response.status} {HTTPStatus(response.status).phrase}"]
    lines += [f"{name}: {value}" for name, value in response.headers]
    lines += [f"Content-Length: {len(response.body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + response.body


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's listen backlog is 5: 32 clients connecting at once lost connections.
    request_queue_size = 128
    gateway: Gateway
    max_body_bytes: int
    header_timeout: float
    body_timeout: float

    def __init__(self, address: tuple[str, int], *, max_connections: int) -> None:
        super().__init__(address, _Handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._stopping = threading.Event()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own once a slot is free."""
        waited_until = time.monotonic() + self.header_timeout
        while not self._slots.acquire(timeout=_SLOT_POLL_SECONDS):
            if self._stopping.is_set() or time.monotonic() >= waited_until:
                self._refuse(request)
                return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        """503 on the accept loop's thread: a few hundred bytes into an empty send buffer."""
        response = self.gateway.error(503, "Service Unavailable")
        response.headers.append(("Retry-After", "1"))
        try:
            request.settimeout(1)
            request.sendall(_raw(response))
            # Read what the client sent already: closing a socket with unread bytes resets the
            # connection, and the client would see the reset instead of the 503.
            request.setblocking(False)
            for _ in range(16):
                if not request.recv(65536):
                    break
        except OSError:
            pass  # nothing more to read (BlockingIOError), or the client is gone
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (reset, closed mid-answer) is nothing to report: socketserver
        would print a traceback into the console for each. Anything else still is reported."""
        if isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            return
        super().handle_error(request, client_address)

    def shutdown(self) -> None:
        self._stopping.set()
        super().shutdown()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "context-ledger-local"
    server: _Server
    _reader: _DeadlineReader

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the plain socket file: it holds a reference on the socket
        self._reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        """One request, its line and headers within the header timeout."""
        self._reader.start(self.server.header_timeout)
        super().handle_one_request()  # a timeout there closes the connection
        if self._reader.timed_out:
            self.close_connection = True
            if self._reader.received:  # part of a request: say why it is not answered
                self._send_raw(self.server.gateway.error(408, "Request Timeout"))

    def _send_raw(self, response: HttpResponse) -> None:
        try:
            self.connection.settimeout(self.server.body_timeout)
            self.connection.sendall(_raw(response))
        except OSError:
            pass  # the client is gone

    def _serve(self) -> None:
        started = time.perf_counter()
        gateway = self.server.gateway
        self._reader.start(self.server.body_timeout)
        try:
            body = self._read_body()
            if not self.path.isascii():
                # A request target is ASCII (RFC 9112); other bytes are percent-encoded.
                raise ValueError("raw non-ASCII bytes in the request target")
        except TimeoutError:
            self.close_connection = True
            response = gateway.error(408, "Request Timeout")
        except _BodyTooLargeError:
            self.close_connection = True
            response = gateway.error(413, "Request Entity Too Large")
        except ValueError:
            self.close_connection = True
            response = gateway.error(400, "Bad Request")
        else:
            request = HttpRequest(
                method=self.command,
                target=self.path,
                headers=list(self.headers.items()),
                body=body,
                source_ip=self.client_address[0],
                server_port=self.server.server_address[1],
                scheme="http",
                protocol=self.request_version,
            )
            try:
                response = gateway.handle(request)
            except Exception:
                logger.exception("the local gateway failed on %s %s", self.command, self.path)
                response = gateway.error(500, "Internal Server Error")
        self._reader.timed_out = False  # answered: handle_one_request has nothing to add
        self._write(response)
        elapsed_ms = (time.perf_counter() - started) * 1000
        logger.info("%s %s %d %.0fms", self.command, self.path, response.status, elapsed_ms)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

    def __getattr__(self, name: str) -> object:
        # Any other method (TRACE, QUERY, ...) reaches the gateway too, which has no route for
        # it (404), rather than the stdlib's HTML 501.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def _read_body(self) -> bytes:
        limit = self.server.max_body_bytes
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked(limit)
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0:
            raise ValueError("negative Content-Length")
        if length > limit:
            raise _BodyTooLargeError
        return self.rfile.read(length)

    def _read_chunked(self, limit: int) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            size = int(self.rfile.readline(1024).split(b";", 1)[0].strip(), 16)
            if size == 0:
                while self.rfile.readline(1024).strip():
                    pass  # trailer fields
                return b"".join(chunks)
            total += size
            if total > limit:
                raise _BodyTooLargeError
            chunks.append(self.rfile.read(size))
            self.rfile.readline(8)

    def _write(self, response: HttpResponse) -> None:
        try:
            self.connection.settimeout(self.server.body_timeout)  # a client that will not read
            self.send_response(response.status)
            for name, value in response.headers:
                if name.lower() not in _SERVER_HEADERS:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(response.body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(response.body)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        """Silenced: ``_serve`` logs one line per request through logging instead."""


class LocalHttpServer:
    """Serves the gateway on ``host:port``; port 0 binds a free port (see :attr:`port`).
    The connection limits are the settings' when it is made."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        host: str = "127.0.0.1",
        port: int = 3000,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self._gateway = gateway
        self._address = (host, port)
        self._max_body_bytes = max_body_bytes
        self._settings = get_settings()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the server is not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self._address[0]}:{self.port}"

    def start(self) -> None:
        settings = self._settings
        server = _Server(self._address, max_connections=settings.local_max_connections)
        server.gateway = self._gateway
        server.max_body_bytes = self._max_body_bytes
        server.header_timeout = settings.local_header_timeout_seconds
        server.body_timeout = settings.local_body_timeout_seconds
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"local-http-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting requests and free the port; requests in flight finish on their own."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None
