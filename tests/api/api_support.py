"""Helpers shared by the API tests (kept out of conftest.py so tests import them by name)."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import os
import secrets
import socket
import time
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import psycopg.sql
import pytest
from jwt.algorithms import RSAAlgorithm

from context_ledger.auth.local_keys import LocalKeys
from context_ledger.db import connection
from context_ledger.sources.searchable import SEARCHABLE_CHUNKS

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def runtime_env(database_url: str, local_keys: LocalKeys, **extra: str) -> dict[str, str]:
    """The environment of a local runtime over the test database, plus ``extra`` variables."""
    return {
        "KEYSTONE_ENVIRONMENT": "local",
        "CONTEXT_LEDGER_HOME": str(local_keys.jwks_path.parent.parent),
        "DATABASE_URL": database_url,
        "KEYSTONE_AUTH_JWKS_URL": local_keys.jwks_url,
        "KEYSTONE_EVIDENCE_HMAC_KEY": secrets.token_hex(32),
        **extra,
    }


def _segment(part: bytes | dict[str, Any]) -> str:
    raw = part if isinstance(part, bytes) else json.dumps(part).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def sign_jws(
    local_keys: LocalKeys, header: bytes | dict[str, Any], payload: bytes | dict[str, Any]
) -> str:
    """A compact JWS over exactly these header and payload (JSON objects, or raw bytes), signed
    RS256 with the local key: whatever they hold, the signature verifies. PyJWT's own encoder
    refuses the hostile headers (a non-string ``kid``) the authorizer tests need."""
    signing_input = f"{_segment(header)}.{_segment(payload)}"
    signature = _RS256.sign(signing_input.encode(), _signing_key(local_keys.private_key_path))
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


_RS256 = RSAAlgorithm(RSAAlgorithm.SHA256)


@functools.cache
def _signing_key(path: Path) -> Any:
    # Loading the PEM checks the RSA key: about 50 ms, too slow for every property example.
    return _RS256.prepare_key(path.read_bytes())


T = TypeVar("T")


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` on a loop of its own. ``asyncio.run`` would leave the main thread
    without a current event loop, and the handlers the next tests invoke (Mangum's adapter)
    ask the main thread for one."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The shell of a person: no test runtime's variables (the session runtime merged its own
    into this process's environment), a home of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KEYSTONE_", "CONTEXT_LEDGER_", "AWS_ENDPOINT_URL"))
        and k != "DATABASE_URL"
    }
    return {**env, "CONTEXT_LEDGER_HOME": str(home), "KEYSTONE_ENVIRONMENT": "local", **extra}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def error_of(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]["code"]


def wait_for_attribution(attribution_id: str, timeout: float = 15.0) -> None:
    """The writer records asynchronously (through the local queue): wait for its lookup row."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM attributions WHERE attribution_id = %s", (attribution_id,)
            ).fetchone()
        if row is not None:
            return
        time.sleep(0.2)
    pytest.fail(f"the writer did not record attribution {attribution_id} within {timeout} s")


def attribution_row(attribution_id: str, timeout: float = 15.0) -> dict | None:
    """The attribution's lookup row joined to its chain entry (``request_id``, ``user_id``,
    ``record``), waiting for the asynchronous writer; None if it never lands."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection() as conn:
            row = conn.execute(
                "SELECT a.request_id, a.user_id, e.record FROM attributions a"
                " JOIN evidence_chain e ON e.chain = a.chain AND e.seq = a.seq"
                " WHERE a.attribution_id = %s",
                (attribution_id,),
            ).fetchone()
        if row is not None:
            return row
        time.sleep(0.2)
    return None


def empty_database(database_url: str) -> None:
    """Truncate every table but schema_migrations (the ``db`` fixture's cleanup after each test,
    and the security suite's after each module)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                " AND tablename <> 'schema_migrations'"
            )
        ]
        truncate = psycopg.sql.SQL("TRUNCATE {} CASCADE").format(
            psycopg.sql.SQL(", ").join(psycopg.sql.Identifier(t) for t in tables)
        )
        # The local runtime's queue poller may still be appending a test's attribution records;
        # its row locks can deadlock with TRUNCATE's table locks. PostgreSQL aborts one side;
        # the writer's message is redelivered, and the cleanup simply tries again.
        for attempt in range(5):
            try:
                conn.execute(truncate)
                return
            except psycopg.errors.DeadlockDetected:
                if attempt == 4:
                    raise


_CURRENT_CHUNKS = f"""
SELECT c.id, c.source_id, c.index_version, c.path, c.symbol, c.content
FROM {SEARCHABLE_CHUNKS}
ORDER BY c.path, c.ordinal
"""


def current_chunks(
    conn: psycopg.Connection, *, org_id: uuid.UUID, source_ids: list[uuid.UUID]
) -> list[dict]:
    """Every searchable chunk of the given sources (what a search may see of them), in path
    order."""
    return conn.execute(_CURRENT_CHUNKS, {"org_id": org_id, "source_ids": source_ids}).fetchall()
