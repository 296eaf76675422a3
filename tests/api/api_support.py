"""Helpers shared by the API tests (kept out of conftest.py so tests import them by name)."""

from __future__ import annotations

import time

import httpx
import pytest

from context_ledger.db import connection


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
