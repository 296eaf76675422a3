"""A request body read whole before the app sees it, and handed to the app again: what the
API's edge (http/app.py, its size limit and bad-input checks) and the MCP function's
(mcp/http_app.py, its JSON-RPC checks) read a body for."""

from __future__ import annotations

from starlette.types import Message, Receive


class ClientGone(Exception):
    """The client disconnected before it sent the whole body."""


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None once it exceeds ``limit`` bytes (the rest is not read).
    Raises ClientGone when the client disconnects first."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGone
        part = message.get("body", b"")
        size += len(part)
        if size > limit:
            return None
        parts.append(part)
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive channel that gives ``body`` first, then whatever the client sends next."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
