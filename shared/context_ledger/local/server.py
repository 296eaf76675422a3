"""The HTTP front door: a threaded stdlib server on loopback that hands requests to the gateway.

Bodies over 10 MB are refused with ``413`` (HTTP APIs' payload limit) before they are read.
Hop-by-hop and length headers from a function's answer are replaced by the server's own.
"""

from __future__ import annotations

import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from context_ledger.local.events import HttpRequest, HttpResponse
from context_ledger.local.gateway import Gateway

logger = logging.getLogger(__name__)

#: API Gateway HTTP APIs refuse payloads over 10 MB.
MAX_BODY_BYTES = 10 * 1024 * 1024
_SERVER_HEADERS = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive"})


class _BodyTooLargeError(Exception):
    """The request body is over the limit."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's listen backlog is 5: 32 clients connecting at once lost connections.
    request_queue_size = 128
    gateway: Gateway
    max_body_bytes: int


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "context-ledger-local"
    # Idle keep-alive connections are closed after this many seconds.
    timeout = 30
    server: _Server

    def _serve(self) -> None:
        started = time.perf_counter()
        gateway = self.server.gateway
        try:
            body = self._read_body()
            if not self.path.isascii():
                # A request target is ASCII (RFC 9112); other bytes are percent-encoded.
                raise ValueError("raw non-ASCII bytes in the request target")
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
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: object) -> None:
        """Silenced: ``_serve`` logs one line per request through logging instead."""


class LocalHttpServer:
    """Serves the gateway on ``host:port``; port 0 binds a free port (see :attr:`port`)."""

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
        server = _Server(self._address, _Handler)
        server.gateway = self._gateway
        server.max_body_bytes = self._max_body_bytes
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
