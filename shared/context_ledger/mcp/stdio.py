"""``context-ledger mcp``: the tools over stdio, for an agent that starts the server itself.

One client for the process, with the credential and URL the command was started with; every
tool call goes through it. A service that cannot be reached is not checked at start: each call
answers it as a tool error naming the URL, so an agent that starts before ``make dev`` recovers
once the service is up.
"""

from __future__ import annotations

import contextlib

import anyio

from context_ledger.mcp import CLIENT_NAME
from context_ledger.mcp.tools import build_server
from context_ledger_client import AsyncContextLedger


def serve_stdio(url: str, token: str) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    anyio.run(_serve, url, token)


async def _serve(url: str, token: str) -> None:
    async with AsyncContextLedger(url, token, client_name=CLIENT_NAME) as client:
        server = build_server(lambda _ctx: contextlib.nullcontext(client))
        await server.run_stdio_async()
