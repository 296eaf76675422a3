"""An OpenAI embeddings server on loopback: the stand-in for tests, and a local model server.

It speaks the real wire protocol (``POST /v1/embeddings``, OpenAI's request, answer and error
bodies, all from ``embeddings/wire.py``, the code the embeddings function serves with), so the
production client is what talks to it in tests and in local runs. By default it serves the hashing
provider; ``--provider minilm`` serves all-MiniLM-L6-v2 from the installed weights. Tests read its
:attr:`~StandInEmbeddingsServer.requests` log to prove what was or was not sent, and make it fail
(:meth:`~StandInEmbeddingsServer.fail_next`) or slow (:attr:`~StandInEmbeddingsServer.delay`) to
exercise retries and timeouts, or go down (:meth:`~StandInEmbeddingsServer.go_down`: the fault
benchmark).

Run it alone with ``context-ledger embeddings-server [--provider minilm] --port 8089``, then set
``KEYSTONE_CONTEXT_EMBEDDINGS_URL=http://127.0.0.1:8089/v1`` and any model name.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from context_ledger.embeddings.hashing import DEFAULT_DIMENSIONS
from context_ledger.embeddings.serving import HashingService, MiniLMService
from context_ledger.embeddings.wire import (
    EmbeddingsService,
    InputError,
    answer,
    error_body,
    respond,
)
from context_ledger.local.serving import serving_in_background

__all__ = [
    "InputError",
    "StandInEmbeddingsServer",
    "embeddings_response",
    "error_body",
    "serve_embeddings",
]

DEFAULT_PORT = 8089
ENDPOINT = "/v1/embeddings"


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the server saw it; ``body`` is None when it was not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


def embeddings_response(body: Any, *, default_dimensions: int) -> dict[str, Any]:
    """The hashing provider's answer to a decoded request body, or InputError."""
    return respond(body, HashingService(default_dimensions))


class StandInEmbeddingsServer(ThreadingHTTPServer):
    """The HTTP server, with its request log and failure hooks."""

    daemon_threads = True

    def __init__(self, port: int, *, service: EmbeddingsService, api_key: str | None) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.service = service
        self.api_key = api_key
        #: Seconds to wait before answering each request (to provoke client timeouts).
        self.delay = 0.0
        self.requests: list[ReceivedRequest] = []
        self._failures: list[tuple[int, str | None]] = []
        self._lock = threading.Lock()
        self.down = False

    @property
    def url(self) -> str:
        """The API base to configure as ``KEYSTONE_CONTEXT_EMBEDDINGS_URL``."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def fail_next(self, status: int, *, times: int = 1, retry_after: str | None = None) -> None:
        """Answer the next ``times`` requests with ``status`` (and ``Retry-After`` if given)."""
        with self._lock:
            self._failures.extend([(status, retry_after)] * times)

    def go_down(self) -> None:
        """Stop serving for good: new connections are refused and kept-alive ones are closed at
        their next request without an answer. (Serve again with a new server on the port.)"""
        self.down = True
        self.shutdown()
        self.server_close()

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._failures.clear()
            self.delay = 0.0

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (a timeout test) is no error worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def _record(self, request: ReceivedRequest) -> tuple[int, str | None] | None:
        with self._lock:
            self.requests.append(request)
            return self._failures.pop(0) if self._failures else None


class _Handler(BaseHTTPRequestHandler):
    server: StandInEmbeddingsServer
    protocol_version = "HTTP/1.1"  # keep-alive, as the client reuses connections
    # Small responses on a kept-alive connection otherwise wait ~40 ms for Nagle + delayed ACK.
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        if self.server.down:
            self.close_connection = True
            return
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        failure = self.server._record(
            ReceivedRequest("POST", self.path, dict(self.headers.items()), body)
        )
        if self.server.delay:
            time.sleep(self.server.delay)
        if failure is not None:
            status, retry_after = failure
            headers = {"Retry-After": retry_after} if retry_after else {}
            message = "The server had an error while processing your request."
            self._send(status, error_body(message, kind="server_error"), headers)
        elif not self._authorised():
            message = "Incorrect API key provided."
            body = error_body(message, kind="invalid_request_error", code="invalid_api_key")
            self._send(401, body)
        elif self.path != ENDPOINT:
            message = f"Invalid URL (POST {self.path})"
            self._send(404, error_body(message, kind="invalid_request_error"))
        else:
            self._send(*answer(raw, self.server.service))

    def do_GET(self) -> None:
        self.server._record(ReceivedRequest("GET", self.path, dict(self.headers.items()), None))
        message = f"Invalid URL (GET {self.path})"
        self._send(404, error_body(message, kind="invalid_request_error"))

    def _authorised(self) -> bool:
        expected = self.server.api_key
        return expected is None or self.headers.get("Authorization") == f"Bearer {expected}"

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests read ``server.requests`` instead of stderr."""


@contextmanager
def serve_embeddings(
    port: int = 0,
    dims: int = DEFAULT_DIMENSIONS,
    *,
    api_key: str | None = None,
    service: EmbeddingsService | None = None,
) -> Iterator[StandInEmbeddingsServer]:
    """Serve on ``127.0.0.1:port`` (0 picks a free port) while in the block.

    ``service`` defaults to the hashing provider with ``dims`` dimensions.
    """
    service = service if service is not None else HashingService(dims)
    server = StandInEmbeddingsServer(port, service=service, api_key=api_key)
    with serving_in_background(server, name="embeddings-stand-in"):
        yield server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="context-ledger embeddings-server",
        description="Serve OpenAI-compatible embeddings on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--provider", choices=("hashing", "minilm"), default="hashing")
    parser.add_argument(
        "--dimensions", type=int, default=DEFAULT_DIMENSIONS, help="hashing: default dimensions"
    )
    parser.add_argument(
        "--model-dir", type=Path, help="minilm: a folder with the model (default: the wheel's)"
    )
    parser.add_argument("--api-key", help="require this bearer key (default: none)")
    args = parser.parse_args(argv)
    service: EmbeddingsService
    if args.provider == "minilm":
        from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider, ModelFilesError

        try:
            service = MiniLMService(MiniLMEmbeddingProvider(args.model_dir))
        except (ModelFilesError, ImportError) as exc:
            print(f"embeddings-server: cannot load all-MiniLM-L6-v2: {exc}", file=sys.stderr)
            return 2
    else:
        service = HashingService(args.dimensions)
    with serve_embeddings(args.port, api_key=args.api_key, service=service) as server:
        print(
            f"embeddings ({args.provider}): KEYSTONE_CONTEXT_EMBEDDINGS_URL={server.url}",
            flush=True,
        )
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
