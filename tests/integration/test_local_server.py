"""The local runtime's HTTP server against slow clients: connections are capped, and a request's
headers and body have deadlines, so slowloris connections cannot hold a thread each for ever.

Short limits through the settings (``KEYSTONE_LOCAL_*``), and a fake function behind the real
gateway; the sockets are real, on loopback.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from context_ledger.local.events import ApiInfo
from context_ledger.local.gateway import Gateway
from context_ledger.local.routes import RouteTable
from context_ledger.local.server import LocalHttpServer
from context_ledger.local.template import HttpRoute
from context_ledger.settings import get_settings

CAP = 3
HEADER_TIMEOUT = 0.5
BODY_TIMEOUT = 1.5


def pong(function: str, event: dict) -> dict:
    return {"statusCode": 200, "body": "pong"}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalHttpServer]:
    monkeypatch.setenv("KEYSTONE_LOCAL_MAX_CONNECTIONS", str(CAP))
    monkeypatch.setenv("KEYSTONE_LOCAL_HEADER_TIMEOUT_SECONDS", str(HEADER_TIMEOUT))
    monkeypatch.setenv("KEYSTONE_LOCAL_BODY_TIMEOUT_SECONDS", str(BODY_TIMEOUT))
    get_settings.cache_clear()
    routes = RouteTable([(HttpRoute("GET", "/ping", None), "Ping")])
    gateway = Gateway(None, routes, pong, ApiInfo("a1b2c3d4e5", "us-east-1"))
    http = LocalHttpServer(gateway, port=0)
    http.start()
    yield http
    http.stop()
    monkeypatch.undo()
    get_settings.cache_clear()


def connect(server: LocalHttpServer, sends: bytes) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    if sends:
        conn.sendall(sends)
    return conn


def answer(conn: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed (monotonic)."""
    received = b""
    while chunk := conn.recv(4096):
        received += chunk
    conn.close()
    return received, time.monotonic()


def ping(server: LocalHttpServer) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = httpx.get(f"{server.url}/ping", timeout=10)
    return response, time.monotonic() - started


def test_slowloris_connections_over_the_cap_are_closed_and_a_normal_request_is_answered(
    server: LocalHttpServer,
) -> None:
    started = time.monotonic()
    slow = [connect(server, b"GET /pi") for _ in range(CAP + 1)]  # half a request line

    response, took = ping(server)
    answers = [answer(conn) for conn in slow]

    assert (response.status_code, response.text) == (200, "pong")
    # served once the first slow ones timed out, not after them all
    assert took < HEADER_TIMEOUT + 1.5
    # Those holding a slot time out (408). The one over the cap waits for a slot as long as the
    # header timeout, and the first free slot races with its deadline (and with the ping): it
    # gets the slot and then 408, or none in time and 503. Either way it is closed.
    statuses = [received.split(b"\r\n", 1)[0] for received, _ in answers]
    assert statuses.count(b"HTTP/1.1 408 Request Timeout") >= CAP, statuses
    assert set(statuses) <= {b"HTTP/1.1 408 Request Timeout", b"HTTP/1.1 503 Service Unavailable"}
    for _, closed_at in answers:
        assert closed_at - started < 2 * HEADER_TIMEOUT + 1.5


def test_a_connection_that_finds_no_free_slot_within_the_header_timeout_gets_503(
    server: LocalHttpServer,
) -> None:
    # Complete headers, a body that never comes: each holds its slot until the body timeout.
    holding = [
        connect(server, b"POST /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        for _ in range(CAP)
    ]
    time.sleep(0.2)  # the three are being served

    refused, took = ping(server)
    held = [answer(conn)[0] for conn in holding]

    assert refused.status_code == 503
    assert refused.json() == {"message": "Service Unavailable"}
    assert refused.headers["Retry-After"] == "1"
    assert HEADER_TIMEOUT - 0.1 < took < BODY_TIMEOUT
    assert all(h.startswith(b"HTTP/1.1 408 Request Timeout\r\n") for h in held), held
    assert ping(server)[0].status_code == 200  # the slots are free again


def test_a_body_that_stops_arriving_is_408_after_the_body_timeout(server: LocalHttpServer) -> None:
    started = time.monotonic()
    conn = connect(server, b"POST /ping HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123")

    received, closed_at = answer(conn)

    assert received.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), received
    assert b'{"message":"Request Timeout"}' in received
    assert BODY_TIMEOUT - 0.1 < closed_at - started < BODY_TIMEOUT + 1.5


def test_headers_trickling_in_byte_by_byte_still_meet_their_deadline(
    server: LocalHttpServer,
) -> None:
    conn = connect(server, b"")
    started = time.monotonic()
    request = b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100
    for byte in request:  # one byte every 20 ms: no single read waits long
        conn.sendall(bytes([byte]))
        if select.select([conn], [], [], 0.02)[0]:
            break  # the server answered: sending on would reset the connection

    received, closed_at = answer(conn)

    assert received.startswith(b"HTTP/1.1 408"), received
    assert closed_at - started < HEADER_TIMEOUT + 1.0


def test_an_idle_connection_is_closed_quietly_after_the_header_timeout(
    server: LocalHttpServer,
) -> None:
    started = time.monotonic()

    received, closed_at = answer(connect(server, b""))

    assert received == b""
    assert HEADER_TIMEOUT - 0.1 < closed_at - started < HEADER_TIMEOUT + 1.0


def test_a_kept_alive_connection_serves_requests_one_after_another(
    server: LocalHttpServer,
) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        answers = [client.get("/ping") for _ in range(2 * CAP)]
        time.sleep(HEADER_TIMEOUT / 2)
        answers.append(client.get("/ping"))

    assert [a.status_code for a in answers] == [200] * (2 * CAP + 1)


def test_a_client_that_resets_its_connection_leaves_no_traceback_and_the_server_serves_on(
    server: LocalHttpServer, capfd: pytest.CaptureFixture[str]
) -> None:
    for _ in range(3):
        conn = connect(server, b"GET /ping HTTP/1.1\r\nHo")
        # SO_LINGER 0: close() sends a reset instead of a FIN, as a killed client's kernel does.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        conn.close()
    time.sleep(0.5)

    response, _ = ping(server)

    assert response.status_code == 200
    assert "Traceback" not in capfd.readouterr().err
