"""The embedded server the local runtime, the tests and the benchmarks start: a new data
directory gets its buffer cache sized (local/postgres.py)."""

from __future__ import annotations

import os

import psycopg
import pytest

from context_ledger.local.postgres import MAX_BUFFER_CACHE_MB, buffer_cache_mb


def test_buffer_cache_is_a_quarter_of_memory_within_bounds() -> None:
    assert 128 <= buffer_cache_mb() <= MAX_BUFFER_CACHE_MB


@pytest.mark.skipif("DATABASE_URL" in os.environ, reason="an external server sizes its own")
def test_a_new_embedded_server_runs_with_that_buffer_cache(pg_server_uri: str) -> None:
    with psycopg.connect(pg_server_uri) as conn:
        pages, unit = conn.execute(
            "SELECT setting::bigint, unit FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()
    assert unit == "8kB"
    assert pages * 8 // 1024 == buffer_cache_mb()
