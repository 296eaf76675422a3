"""``Float4Array`` (db/float4_array.py): bound as a ``real[]``, it is the value a list of floats
becomes once cast to ``real[]``, ``vector`` or ``halfvec``, whatever the connection."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import psycopg
import pytest

from context_ledger.db.float4_array import Float4Array

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def conn(database_url):
    with psycopg.connect(database_url) as conn:
        yield conn


def test_the_server_reads_single_precision_values(conn) -> None:
    values = [random.uniform(-2, 2) for _ in range(384)] + [0.0, -0.0, 1e-30, 3.4e38]
    with conn.cursor(binary=True) as cursor:  # floats read back exactly
        row = cursor.execute("SELECT %s::real[]", [Float4Array(values)]).fetchone()
    assert row[0] == np.asarray(values, dtype=np.float32).tolist()


@pytest.mark.parametrize("cast", ["real[]", "vector(5)", "halfvec(5)"])
def test_a_cast_gives_what_the_cast_of_a_float8_list_gives(conn, cast) -> None:
    values = [0.1, -1 / 3, 2.5e-8, 123.456789, -7.0]
    same = conn.execute(
        f"SELECT %s::{cast} = %s::float8[]::{cast}", [Float4Array(values), values]
    ).fetchone()
    assert same == (True,)


def test_an_empty_array(conn) -> None:
    assert conn.execute("SELECT cardinality(%s::real[])", [Float4Array([])]).fetchone() == (0,)


def test_other_real_arrays_keep_psycopgs_dumper(conn) -> None:
    """Only Float4Array objects: a binary COPY of real[] lists (store_embeddings) is untouched."""
    conn.execute("CREATE TEMP TABLE vectors (v real[])")
    with conn.cursor().copy("COPY vectors (v) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["real[]"])
        copy.write_row([[0.5, None, -1.0]])
    assert conn.execute("SELECT v FROM vectors").fetchone() == ([0.5, None, -1.0],)


def test_pooled_connections_opened_before_the_search_modules_bind_it(database_url) -> None:
    # The local runtime serves every function from one process: a pool another function opened
    # first must bind the retrieve function's query vectors too.
    script = """
from context_ledger.db import connection, close_pool
with connection() as conn:
    conn.execute("SELECT 1")
from context_ledger.search.query import SearchQuery
query = SearchQuery(None, [], "q", [1.5, -2.0], 1)
with connection() as conn:
    print(conn.execute("SELECT %(query_vector)s::real[] AS v", query.params()).fetchone()["v"])
close_pool()
"""
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONPATH": str(SHARED)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1.5, -2.0]"
