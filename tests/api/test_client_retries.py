"""The client's retries and transport failures against a stand-in server on loopback that speaks
plain HTTP: it answers a script of (status, headers, body) and counts what it was sent. Nothing of
httpx is patched."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from api_support import run_coroutine

from context_ledger_client import (
    AsyncContextLedger,
    ContextLedger,
    ContextLedgerError,
    RateLimitedError,
    RetryPolicy,
    ServiceUnavailableError,
    ServiceUnreachableError,
)

RETRIEVED = {
    "chunks": [],
    "sourcesSummary": [],
    "tokensUsed": 0,
    "attributionId": "6f1c1d3e-5b6a-4f1e-9a51-2b1f0c1e2d3a",
    "requestId": "req-1",
    "searchMode": "full_text",
    "warnings": [],
}
SPACE = {
    "id": "2a0c4f5e-1111-4222-8333-944455556666",
    "name": "Payments",
    "level": "team",
    "parentId": None,
    "key": None,
    "createdAt": "2026-12-02T06:00:00Z",
    "permissions": ["context:space:admin", "context:space:search"],
}
BUSY = {"error": {"code": "service_unavailable", "message": "try again"}}
LIMITED = {"error": {"code": "rate_limited", "message": "over the organisation's rate limit"}}


@dataclass
class StandIn:
    url: str
    script: list[tuple[int, dict[str, str], object]]
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)


@contextmanager
def stand_in(*script: tuple[int, dict[str, str], object], delay: float = 0.0) -> Iterator[StandIn]:
    """Answers the script in order (the last entry for every request after it)."""
    state = StandIn(url="", script=list(script))

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            state.seen.append((self.command, self.path, dict(self.headers)))
            state.times.append(time.monotonic())
            status, headers, body = state.script[min(len(state.seen), len(state.script)) - 1]
            time.sleep(float(headers.pop("X-Stand-In-Delay", delay)))
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = _answer

        def log_message(self, *_: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a client that timed out closed the socket the late answer is written to

    server = Server(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def test_a_503_with_retry_after_is_waited_for_and_retried() -> None:
    with (
        stand_in((503, {"Retry-After": "1"}, BUSY), (200, {}, RETRIEVED)) as server,
        ContextLedger(server.url, "ctxl_test") as cl,
    ):
        answer = cl.retrieve("refunds")

    assert answer.request_id == "req-1"
    assert [(m, p) for m, p, _ in server.seen] == [("POST", "/api/v1/context/retrieve")] * 2
    assert server.times[1] - server.times[0] >= 0.95  # Retry-After: 1 was honoured
    headers = server.seen[0][2]
    assert headers["Authorization"] == "Bearer ctxl_test"
    assert headers["X-Keystone-Client"] == "context-ledger-client/0.1.0"


def test_the_async_client_retries_a_429_with_retry_after() -> None:
    async def retrieve(url: str) -> str:
        async with AsyncContextLedger(url, "ctxl_test", client_name="my-agent/2.0") as cl:
            return (await cl.retrieve("refunds")).request_id

    with stand_in((429, {"Retry-After": "1"}, LIMITED), (200, {}, RETRIEVED)) as server:
        assert run_coroutine(retrieve(server.url)) == "req-1"

    assert len(server.seen) == 2
    assert server.times[1] - server.times[0] >= 0.95
    assert server.seen[0][2]["X-Keystone-Client"] == "my-agent/2.0"


def test_a_429_is_retried_even_for_a_call_that_is_not_idempotent() -> None:
    # the service refuses a rate-limited request before doing anything: sending it again is safe
    with (
        stand_in((429, {"Retry-After": "0"}, LIMITED), (201, {}, SPACE)) as server,
        ContextLedger(server.url, "ctxl_test") as cl,
    ):
        space = cl.create_space("Payments", level="team")

    assert space.name == "Payments"
    assert len(server.seen) == 2


def test_a_503_is_not_retried_for_a_call_that_is_not_idempotent() -> None:
    with (
        stand_in((503, {"Retry-After": "0"}, BUSY), (201, {}, SPACE)) as server,
        ContextLedger(server.url, "ctxl_test") as cl,
        pytest.raises(ServiceUnavailableError),
    ):
        cl.create_space("Payments", level="team")

    assert len(server.seen) == 1  # the space may have been created: not sent twice


def test_a_503_without_retry_after_is_retried_with_backoff_async() -> None:
    async def spaces(url: str) -> int:
        retry = RetryPolicy(backoff=0.1)
        async with AsyncContextLedger(url, "ctxl_test", retry=retry) as cl:
            return len(await cl.spaces())

    with stand_in((503, {}, BUSY), (503, {}, BUSY), (200, {}, {"spaces": [SPACE]})) as server:
        assert run_coroutine(spaces(server.url)) == 1

    assert len(server.seen) == 3
    assert server.times[2] - server.times[1] >= 0.19  # 0.1 then 0.2


def test_retries_stop_at_the_attempt_bound_with_the_apis_error() -> None:
    retry = RetryPolicy(max_attempts=3, backoff=0.01)
    with (
        stand_in((503, {}, BUSY)) as server,
        ContextLedger(server.url, "ctxl_test", retry=retry) as cl,
        pytest.raises(ServiceUnavailableError) as error,
    ):
        cl.spaces()

    assert len(server.seen) == 3
    assert (error.value.status, error.value.code, error.value.message) == (
        503,
        "service_unavailable",
        "try again",
    )


def test_a_retry_after_beyond_the_wait_bound_is_not_waited_for() -> None:
    with (
        stand_in((429, {"Retry-After": "120"}, LIMITED)) as server,
        ContextLedger(server.url, "ctxl_test", retry=RetryPolicy(max_wait=30)) as cl,
    ):
        started = time.monotonic()
        with pytest.raises(RateLimitedError) as error:
            cl.spaces()

    assert time.monotonic() - started < 5
    assert len(server.seen) == 1
    assert (error.value.code, error.value.retry_after) == ("rate_limited", 120.0)


def test_an_answer_without_the_error_body_still_raises_a_client_error() -> None:
    # API Gateway's own refusals: {"message": ...} and no code
    with (
        stand_in((502, {}, {"message": "Internal Server Error"})) as server,
        ContextLedger(server.url, "ctxl_test") as cl,
        pytest.raises(ContextLedgerError) as e,
    ):
        cl.spaces()

    assert (e.value.status, e.value.code, e.value.message) == (
        502,
        "http_502",
        "Internal Server Error",
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_server_that_cannot_be_reached_is_a_connection_error_naming_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with ContextLedger(url, "ctxl_test") as cl, pytest.raises(ConnectionError) as error:
        cl.spaces()

    assert isinstance(error.value, ServiceUnreachableError)
    assert isinstance(error.value, ContextLedgerError)
    assert error.value.url == url
    assert url in str(error.value)

    async def unreachable() -> ServiceUnreachableError:
        async with AsyncContextLedger(url, "ctxl_test") as cl:
            try:
                await cl.spaces()
            except ServiceUnreachableError as exc:
                return exc
        raise AssertionError("answered")

    assert run_coroutine(unreachable()).url == url


def test_a_server_that_does_not_answer_in_time_is_unreachable() -> None:
    with (
        stand_in((200, {}, {"spaces": []}), delay=1.0) as server,
        ContextLedger(server.url, "ctxl_test", timeout=0.2) as cl,
        pytest.raises(ServiceUnreachableError, match="no answer in time"),
    ):
        cl.spaces()


def test_an_index_build_whose_batch_gets_no_answer_is_aborted(tmp_path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    script = (
        (201, {}, {"version": 3}),
        (200, {"X-Stand-In-Delay": "1.0"}, {"documents": 1}),  # no answer within the timeout
        (200, {}, {"version": 3, "state": "aborted"}),
    )
    with (
        stand_in(*script) as server,
        ContextLedger(server.url, "ctxl_test", timeout=0.3) as cl,
        pytest.raises(ServiceUnreachableError) as error,
    ):
        cl.index_folder("src-1", tmp_path)

    base = "/api/v1/context/sources/src-1/index-versions"
    assert [p for _, p, _ in server.seen] == [base, f"{base}/3/documents", f"{base}/3/abort"]
    assert error.value.__notes__ == ["index version 3 aborted; the published version is unchanged"]
