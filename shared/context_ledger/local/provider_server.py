"""A stand-in OpenAI-compatible model provider on loopback, for the gateway's tests, benchmark
and local runs.

It speaks the real wire protocol: ``POST /v1/chat/completions`` (a JSON answer, or with
``"stream": true`` server-sent events in chunked transfer encoding, ending ``data: [DONE]``, with
a usage event when ``stream_options.include_usage`` is set) and ``POST /v1/embeddings`` (the
hashing provider, as the embeddings stand-in answers). The chat model echoes the last user
message, so answers are predictable; they carry non-ASCII text and the spacing of Python's
``json.dumps``, so a proxy that re-encoded them would be caught.

Every exchange is recorded (:attr:`StandInProviderServer.exchanges`): the request's headers and
body bytes and the exact bytes answered, so tests prove what reached the provider and compare the
gateway's answer with the provider's byte for byte. :meth:`~StandInProviderServer.fail_next`
answers an OpenAI error instead, and :meth:`~StandInProviderServer.hold_streams` sends a stream's
headers but holds its body until released (a model slow to its first token), so a test can see
what a proxy does between the two.

Run it alone with ``python -m context_ledger.local.provider_server --port 8090`` and set
``KEYSTONE_MODELS_PROVIDER_URL=http://127.0.0.1:8090/v1``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from context_ledger.embeddings.hashing import DEFAULT_DIMENSIONS
from context_ledger.local.embeddings_server import InputError, embeddings_response, error_body
from context_ledger.local.serving import serving_in_background

DEFAULT_PORT = 8090
CHAT = "/v1/chat/completions"
EMBEDDINGS = "/v1/embeddings"
#: A fixed creation time keeps answers reproducible (the id is a hash of the request).
CREATED = 1767225600


@dataclass(frozen=True)
class Exchange:
    """One request as the provider received it, and the body bytes it answered."""

    path: str
    headers: dict[str, str]
    body: bytes
    status: int
    answer: bytes


def _tokens(text: str) -> int:
    return len(text.split())


def _last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InputError("'messages' must be a non-empty array.", "messages")
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
    return ""


def chat_reply(body: Any) -> tuple[str, str, int]:
    """(completion id, reply text, prompt tokens) for a chat request body, or InputError."""
    if not isinstance(body, dict):
        raise InputError("The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise InputError("you must provide a model parameter", "model")
    prompt = _last_user_text(body)
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
    reply = f"Echo — “{prompt}” ✓"
    prompt_tokens = sum(
        _tokens(m["content"])
        for m in body["messages"]
        if isinstance(m, dict) and isinstance(m.get("content"), str)
    )
    return f"chatcmpl-{digest}", reply, prompt_tokens


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    completion_id, reply, prompt_tokens = chat_reply(body)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(prompt_tokens, _tokens(reply)),
    }


def chat_events(body: dict[str, Any]) -> list[bytes]:
    """The SSE events of a streamed chat answer, ``data: [DONE]`` last."""
    completion_id, reply, prompt_tokens = chat_reply(body)

    def chunk(delta: dict[str, Any], finish: str | None, usage: Any = None) -> dict[str, Any]:
        event = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": body["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            event["choices"] = []
            event["usage"] = usage
        return event

    words = reply.split(" ")
    events = [chunk({"role": "assistant", "content": ""}, None)]
    events += [chunk({"content": w if i == 0 else f" {w}"}, None) for i, w in enumerate(words)]
    events.append(chunk({}, "stop"))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        events.append(chunk({}, None, _usage(prompt_tokens, _tokens(reply))))
    encoded = [f"data: {json.dumps(e, ensure_ascii=False)}\n\n".encode() for e in events]
    return [*encoded, b"data: [DONE]\n\n"]


class StandInProviderServer(ThreadingHTTPServer):
    """The HTTP server, with its exchange log and failure hook."""

    daemon_threads = True

    def __init__(self, port: int, *, api_key: str | None) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.api_key = api_key
        self.exchanges: list[Exchange] = []
        self._failures: list[int] = []
        self._held = threading.Event()
        self._held.set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The API base to configure as ``KEYSTONE_MODELS_PROVIDER_URL``."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def fail_next(self, status: int, *, times: int = 1) -> None:
        """Answer the next ``times`` requests with an OpenAI error of ``status``."""
        with self._lock:
            self._failures.extend([status] * times)

    def hold_streams(self) -> threading.Event:
        """From now on a streamed answer sends its headers, then waits for the returned event
        (at most 30 s) before its body; ``reset`` releases it."""
        self._held.clear()
        return self._held

    def reset(self) -> None:
        with self._lock:
            self.exchanges.clear()
            self._failures.clear()
        self._held.set()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up is no error worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def _next_failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)


class _Handler(BaseHTTPRequestHandler):
    server: StandInProviderServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        status, answer = self._answer(body)
        events = answer if isinstance(answer, list) else None
        answered = b"".join(events) if events else json.dumps(answer, ensure_ascii=False).encode()
        # Recorded before answering: a test reading the log after its answer must find it.
        self.server._record(Exchange(self.path, dict(self.headers.items()), raw, status, answered))
        if events:
            self._send_stream(events)
        else:
            self._send(status, answered)

    def _answer(self, body: Any) -> tuple[int, Any]:
        failure = self.server._next_failure()
        if failure is not None:
            message = "The server had an error while processing your request."
            return failure, error_body(message, kind="server_error")
        expected = self.server.api_key
        if expected is not None and self.headers.get("Authorization") != f"Bearer {expected}":
            message = "Incorrect API key provided."
            return 401, error_body(message, kind="invalid_request_error", code="invalid_api_key")
        if self.path not in (CHAT, EMBEDDINGS):
            return 404, error_body(f"Invalid URL (POST {self.path})", kind="invalid_request_error")
        if body is None:
            message = "We could not parse the JSON body of your request."
            return 400, error_body(message, kind="invalid_request_error")
        try:
            if self.path == EMBEDDINGS:
                return 200, embeddings_response(body, default_dimensions=DEFAULT_DIMENSIONS)
            if body.get("stream") is True:
                return 200, chat_events(body)
            return 200, chat_completion(body)
        except InputError as exc:
            return 400, error_body(str(exc), kind="invalid_request_error", param=exc.param)

    def _send(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-ratelimit-remaining-requests", "999")
        self.send_header("openai-organization", "stand-in")
        self.end_headers()
        self.wfile.write(payload)

    def _send_stream(self, events: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.flush()
        self.server._held.wait(timeout=30)
        for event in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests read ``server.exchanges`` instead of stderr."""


@contextmanager
def serve_provider(port: int = 0, *, api_key: str | None = None) -> Iterator[StandInProviderServer]:
    """Run the stand-in provider on ``127.0.0.1:port`` (0 picks a free port) while in the block."""
    server = StandInProviderServer(port, api_key=api_key)
    with serving_in_background(server, name="provider-stand-in"):
        yield server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="context-ledger provider-server",
        description="Serve an OpenAI-compatible echo model (chat, embeddings) on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--api-key", help="require this bearer key (default: none)")
    args = parser.parse_args(argv)
    with serve_provider(args.port, api_key=args.api_key) as server:
        print(f"provider stand-in: KEYSTONE_MODELS_PROVIDER_URL={server.url}", flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
