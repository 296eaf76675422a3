"""A stand-in OpenAI embeddings server on loopback, backed by the hashing provider.

It speaks the real wire protocol (``POST /v1/embeddings``, OpenAI's request, answer and error
bodies), so the production client is what talks to it in tests and in local runs. Tests read its
:attr:`~StandInEmbeddingsServer.requests` log to prove what was or was not sent, and make it fail
(:meth:`~StandInEmbeddingsServer.fail_next`) or slow (:attr:`~StandInEmbeddingsServer.delay`) to
exercise retries and timeouts.

Run it alone with ``python -m context_ledger.local.embeddings_server --port 8089``, then set
``KEYSTONE_CONTEXT_EMBEDDINGS_URL=http://127.0.0.1:8089/v1`` and any model name.
"""

from __future__ import annotations

import argparse
import base64
import json
import struct
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from context_ledger.embeddings.hashing import DEFAULT_DIMENSIONS, HashingEmbeddingProvider

DEFAULT_PORT = 8089
ENDPOINT = "/v1/embeddings"
MAX_INPUTS = 2048  # OpenAI's limit per request


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the server saw it; ``body`` is None when it was not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class InputError(ValueError):
    """The request body breaks OpenAI's rules; answered 400 with ``param`` named."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def error_body(
    message: str, *, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error body."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def embeddings_response(body: Any, *, default_dimensions: int) -> dict[str, Any]:
    """OpenAI's answer to an embeddings request body, or InputError."""
    if not isinstance(body, dict):
        raise InputError("The request body must be a JSON object.")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise InputError("you must provide a model parameter", "model")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if (
        not isinstance(texts, list)
        or not 1 <= len(texts) <= MAX_INPUTS
        or not all(isinstance(t, str) and t for t in texts)
    ):
        raise InputError(
            f"'input' must be a non-empty string or an array of 1 to {MAX_INPUTS} non-empty"
            " strings.",
            "input",
        )
    dimensions = body.get("dimensions", default_dimensions)
    if type(dimensions) is not int or dimensions < 1:
        raise InputError("'dimensions' must be a positive integer.", "dimensions")
    encoding = body.get("encoding_format", "float")
    if encoding not in ("float", "base64"):
        raise InputError("'encoding_format' must be 'float' or 'base64'.", "encoding_format")

    vectors = HashingEmbeddingProvider(dimensions).embed(texts)
    tokens = sum(len(t.split()) for t in texts)
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": _encode(vector, encoding)}
            for i, vector in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _encode(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "float":
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


class StandInEmbeddingsServer(ThreadingHTTPServer):
    """The HTTP server, with its request log and failure hooks."""

    daemon_threads = True

    def __init__(self, port: int, *, dimensions: int, api_key: str | None) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.dimensions = dimensions
        self.api_key = api_key
        #: Seconds to wait before answering each request (to provoke client timeouts).
        self.delay = 0.0
        self.requests: list[ReceivedRequest] = []
        self._failures: list[tuple[int, str | None]] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The API base to configure as ``KEYSTONE_CONTEXT_EMBEDDINGS_URL``."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def fail_next(self, status: int, *, times: int = 1, retry_after: str | None = None) -> None:
        """Answer the next ``times`` requests with ``status`` (and ``Retry-After`` if given)."""
        with self._lock:
            self._failures.extend([(status, retry_after)] * times)

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
        elif body is None:
            message = "We could not parse the JSON body of your request."
            self._send(400, error_body(message, kind="invalid_request_error"))
        else:
            try:
                answer = embeddings_response(body, default_dimensions=self.server.dimensions)
            except InputError as exc:
                self._send(400, error_body(str(exc), kind="invalid_request_error", param=exc.param))
            else:
                self._send(200, answer)

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
    port: int = 0, dims: int = DEFAULT_DIMENSIONS, *, api_key: str | None = None
) -> Iterator[StandInEmbeddingsServer]:
    """Run the stand-in server on ``127.0.0.1:port`` (0 picks a free port) while in the block."""
    server = StandInEmbeddingsServer(port, dimensions=dims, api_key=api_key)
    # A short poll interval makes shutdown quick: tests start and stop servers often.
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="embeddings-stand-in", daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="context-ledger embeddings-server",
        description="Serve OpenAI-compatible embeddings (hashing provider) on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--dimensions", type=int, default=DEFAULT_DIMENSIONS)
    parser.add_argument("--api-key", help="require this bearer key (default: none)")
    args = parser.parse_args(argv)
    with serve_embeddings(args.port, args.dimensions, api_key=args.api_key) as server:
        print(f"embeddings stand-in: KEYSTONE_CONTEXT_EMBEDDINGS_URL={server.url}", flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
