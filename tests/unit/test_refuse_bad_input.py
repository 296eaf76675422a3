"""The body-limit and bad-target middleware of every app (http/app.py), at the ASGI level:
what reaches the app, and what is refused before it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request

from context_ledger.http.app import RefuseBadInput, _error

LIMIT = 10


class RecordingApp:
    """Reads the body the way a route does and answers 200."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.bodies.append(await Request(scope, receive).body())
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def call(
    parts: list[bytes],
    *,
    headers: list[tuple[bytes, bytes]] = (),
    query: bytes = b"",
    complete: bool = True,
) -> tuple[RecordingApp, int, dict[str, Any] | None, int]:
    """Send ``parts`` as the request body (then disconnect, if not ``complete``); the app, the
    status (0: no answer), the error body and how many messages the middleware took."""
    app = RecordingApp()
    middleware = RefuseBadInput(app, max_body_bytes=LIMIT, error_response=_error)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/x",
        "query_string": query,
        "headers": list(headers),
    }
    pending = [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1 or not complete}
        for i, part in enumerate(parts)
    ]
    taken = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal taken
        if taken < len(pending):
            taken += 1
            return pending[taken - 1]
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(middleware(scope, receive, send))
    if not sent:
        return app, 0, None, taken
    status = sent[0]["status"]
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return app, status, (json.loads(body) if status != 200 else None), taken


def test_a_body_sent_in_parts_reaches_the_app_whole() -> None:
    app, status, _, _ = call([b"ab", b"cd", b"ef"])
    assert status == 200
    assert app.bodies == [b"abcdef"]


def test_an_empty_body_reaches_the_app_empty() -> None:
    app, status, _, _ = call([b""])
    assert (status, app.bodies) == (200, [b""])


def test_a_body_at_the_limit_is_accepted() -> None:
    app, status, _, _ = call([b"x" * LIMIT])
    assert (status, app.bodies) == (200, [b"x" * LIMIT])


def test_a_body_over_the_limit_is_refused_without_reading_the_rest() -> None:
    app, status, error, taken = call([b"x" * 6, b"x" * 6, b"x" * 6])
    assert status == 413
    assert error["error"]["code"] == "payload_too_large"
    assert taken == 2  # the third part was never read
    assert app.bodies == []


def test_a_declared_length_over_the_limit_is_refused_before_any_read() -> None:
    app, status, error, taken = call([b"x"], headers=[(b"content-length", b"11")])
    assert (status, error["error"]["code"], taken, app.bodies) == (
        413,
        "payload_too_large",
        0,
        [],
    )


def test_a_query_string_that_is_not_utf8_is_refused() -> None:
    app, status, error, _ = call([b"{}"], query=b"q=%ff")
    assert (status, error["error"]["code"], app.bodies) == (400, "invalid_request", [])


def test_a_nul_in_the_query_string_is_refused() -> None:
    app, status, error, _ = call([b"{}"], query=b"q=a%00b")
    assert (status, error["error"]["code"], app.bodies) == (400, "invalid_request", [])


def test_a_client_gone_before_the_end_of_its_body_gets_nothing_and_the_app_sees_nothing() -> None:
    app, status, _, taken = call([b"ab", b"cd"], complete=False)
    assert (status, app.bodies, taken) == (0, [], 2)
