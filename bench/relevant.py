"""/relevant latency: the memory Lambda handler in-process against the bare SQL it needs.

For each project size (default 1k, 10k and 100k memories in one project) and mode it measures,
query by query and interleaved:

- ``handler``: ``functions/memory/app.py``'s ``handler(event, context)``, loaded by file path as
  the local runtime loads it, called with a real HTTP API payload 2.0 event for
  ``GET /api/context/{project_id}/relevant?query=...&limit=5`` whose authorizer context carries
  the caller (Mangum → FastAPI → rate-limit count → project and permission lookup → DLP gate and
  query embedding → candidates → vectors → numpy scoring of every candidate → ranking → the top
  rows). The rate limit stays on (at a limit the run never reaches) so its counter write counts.
- ``bare``: the statements /relevant cannot do without, alone: the candidate statement
  (``memory.store``: the newest ``VENKAI_RETRIEVAL_MAX_CANDIDATES + 1`` served entries packed in
  one row) and, for a query, every candidate's vector (the same newest entries' vectors in one
  scan); executed with psycopg on another connection, rows fetched: no HTTP, permission,
  embedding, scoring or JSON.

Modes: ``query`` (a SciFact claim, embedded in-process by the hashing provider as /relevant does
without an embeddings endpoint; the function's vector cache warm, as in a warm Lambda), ``cold``
(the same with the vector cache emptied before each call, as in a cold Lambda) and ``empty`` (no
query: similarity 1.0 for all, no vectors read).

At 100k memories the default candidate cap (10,000) applies: both sides read the newest 10,001
rows, and the handler logs its truncation warning (the log level is raised to ERROR here so the
warnings do not flood the table).

Data: SciFact abstracts' sentences (read from ``/work/shared/data/scifact/corpus.jsonl``), one to
three per memory, shuffled with a fixed seed; importance, confidence and access counts drawn from
a seeded generator; creation times spread evenly over the last year, in writing order. The first
memory is written through the use case (creating the project and its memory source); the rest
are bulk-loaded with ``COPY`` into entries (with their hashing-provider vectors) and revisions;
their retrieval chunks are not loaded, as /relevant does not read them. Each size appends to the
same project, then ``VACUUM ANALYZE``.

    .venv/bin/python bench/relevant.py                                # 1k, 10k, 100k; 100 queries
    .venv/bin/python bench/relevant.py --sizes 1000,10000 --queries 50

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg
from bench_support import LambdaFunction, Stats, load_function, load_queries, write_results
from psycopg.rows import dict_row
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "scifact"
ROUTE_KEY = "GET /api/context/{project_id}/relevant"
PROJECT = "scifact-memories"
SEED = 20261129
WARMUP = 5
LIMIT = 5
TARGET_P95_MS = 200.0
TARGET_SIZE = 10_000
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")
TYPES = ("decision", "constraint", "fact", "preference", "todo", "note")


# --- data ---------------------------------------------------------------------------------------


def memory_texts(corpus: Path) -> list[str]:
    """One to three consecutive sentences of each abstract, in a fixed random order."""
    texts = []
    with corpus.open() as handle:
        for line in handle:
            sentences = SENTENCE_END.split(json.loads(line)["text"].strip())
            for start in range(0, len(sentences), 3):
                texts.append(" ".join(sentences[start : start + 3]))
    random.Random(SEED).shuffle(texts)
    return texts


@dataclass(frozen=True)
class Fixture:
    caller: Any  # context_ledger.auth.principal.Principal
    space_id: uuid.UUID


def create_fixture(first_text: str) -> Fixture:
    """An organisation and its administrator; the project created by a first write."""
    from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
    from context_ledger.db import connection
    from context_ledger.http.memory import dependencies
    from context_ledger.memory import service
    from context_ledger.memory.projects import find_project
    from context_ledger.spaces.permissions import Permission
    from context_ledger.spaces.service import create_organisation

    with connection() as conn:
        org = create_organisation(conn, name="bench relevant")
        caller = Principal(
            org_id=org.id,
            user_id="planner",
            client_id="context-ledger-bench",
            scopes=frozenset({SCOPE_CONTEXT_ADMIN}),
        )
        fields = {
            "type": "fact",
            "content": first_text,
            "confidence": 1.0,
            "importance": 0.5,
            "metadata": {},
        }
        service.create_memory(
            conn,
            caller,
            PROJECT,
            item=service.NewMemory(fields=fields, agent_key="bench"),
            deps=asyncio.run(dependencies()),
        )
        project = find_project(conn, caller, PROJECT, Permission.SEARCH)
    return Fixture(caller, project.space_id)


_COPY_ENTRIES = """
COPY memory_entries (id, org_id, space_id, agent_key, accepted_revision, latest_revision,
                     access_count, created_at, updated_at, importance, token_count,
                     embedding_f32, embedding_provider) FROM STDIN (FORMAT BINARY)
"""
_ENTRY_TYPES = [
    "text",
    "uuid",
    "uuid",
    "text",
    "int4",
    "int4",
    "int4",
    "timestamptz",
    "timestamptz",
    "float8",
    "int4",
    "bytea",
    "text",
]
_COPY_REVISIONS = """
COPY memory_revisions (entry_id, revision, type, content, confidence, importance, metadata,
                       state, author_user_id, created_at, accepted_at) FROM STDIN (FORMAT BINARY)
"""
_REVISION_TYPES = [
    "text",
    "int4",
    "text",
    "text",
    "float8",
    "float8",
    "jsonb",
    "text",
    "text",
    "timestamptz",
    "timestamptz",
]
#: Memories are written over a year, about evenly: memory ``i`` of ``MAX_SPAN`` was written
#: ``(MAX_SPAN - i) / MAX_SPAN`` of a year ago, with a few minutes of jitter.
MAX_SPAN = 100_000
YEAR_SECONDS = 365 * 86_400


def load_memories(
    url: str, fixture: Fixture, texts: Sequence[str], start: int, stop: int, rng: random.Random
) -> None:
    """Append memories ``start`` to ``stop`` to the project (one transaction)."""
    from psycopg.types.json import Jsonb

    from context_ledger.embeddings.hashing import HashingEmbeddingProvider
    from context_ledger.memory.model import new_memory_id
    from context_ledger.memory.scoring import unit
    from context_ledger.text.tokens import count_tokens

    provider = HashingEmbeddingProvider()
    provider_name = f"{provider.name}/{provider.dimensions}"
    now = datetime.now(UTC)
    entries, revisions = [], []
    for ordinal in tqdm(range(start, stop), desc=f"embed memories to {stop:,}", leave=False):
        text = texts[ordinal % len(texts)]
        if ordinal >= len(texts):
            text = f"{text} (variant {ordinal // len(texts)})"
        memory_id = new_memory_id()
        age = YEAR_SECONDS * max(0, MAX_SPAN - ordinal) / MAX_SPAN + rng.uniform(0, 300)
        created = now - timedelta(seconds=age)
        importance = round(rng.random(), 2)
        vector = unit(provider.embed_text(text)).astype("<f4").tobytes()
        entries.append(
            (memory_id, fixture.caller.org_id, fixture.space_id, "bench", 1, 1,
             rng.randint(0, 20), created, created, importance, count_tokens(text), vector,
             provider_name)
        )  # fmt: skip
        revisions.append(
            (memory_id, 1, rng.choice(TYPES), text, round(rng.random(), 2), importance,
             Jsonb({"ordinal": ordinal}), "accepted", "planner", created, created)
        )  # fmt: skip
    with psycopg.connect(url) as conn:
        with conn.cursor() as cursor, cursor.copy(_COPY_ENTRIES) as copy:
            copy.set_types(_ENTRY_TYPES)
            for row in tqdm(entries, desc="copy entries", leave=False):
                copy.write_row(row)
        with conn.cursor() as cursor, cursor.copy(_COPY_REVISIONS) as copy:
            copy.set_types(_REVISION_TYPES)
            for row in tqdm(revisions, desc="copy revisions", leave=False):
                copy.write_row(row)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memory_entries")
        conn.execute("VACUUM ANALYZE memory_revisions")


# --- the handler --------------------------------------------------------------------------------


def relevant_event(fixture: Fixture, query: str) -> dict[str, Any]:
    from context_ledger.local.events import ApiInfo, HttpRequest, Stamp, http_event

    params = {"query": query, "limit": LIMIT} if query else {"limit": LIMIT}
    request = HttpRequest(
        method="GET",
        target=f"/api/context/{PROJECT}/relevant?{urlencode(params)}",
        headers=[
            ("host", "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"),
            ("accept", "application/json"),
            ("authorization", "Bearer ctxl_bench-credential"),
            ("user-agent", "context-ledger-bench/1"),
        ],
    )
    return http_event(
        request,
        route_key=ROUTE_KEY,
        path_parameters={"project_id": PROJECT},
        api=ApiInfo(api_id="a1b2c3d4e5", region="us-east-1"),
        stamp=Stamp.new(),
        authorizer_context=fixture.caller.to_authorizer_context(),
    )


def call_handler(handler: LambdaFunction, event: dict[str, Any], *, cold: bool = False) -> float:
    """Seconds one call takes (``cold``: the function's vector cache emptied first)."""
    if cold:
        from context_ledger.http.memory import _VECTOR_CACHE

        _VECTOR_CACHE.clear()
    started = time.perf_counter()
    response = handler(event)
    seconds = time.perf_counter() - started
    if response.get("statusCode") != 200:
        raise RuntimeError(f"/relevant answered {response.get('statusCode')}: {response['body']}")
    if len(json.loads(response["body"])["memories"]) != LIMIT:
        raise RuntimeError("/relevant answered fewer memories than the limit")
    return seconds


def bare_candidates(conn: psycopg.Connection, fixture: Fixture, *, with_vectors: bool) -> float:
    """What /relevant reads, alone: the candidate statement and, for a query, every candidate's
    vector (as a handler without its vector cache reads them); rows fetched, nothing decoded or
    scored."""
    from context_ledger.embeddings.hashing import DEFAULT_DIMENSIONS, HashingEmbeddingProvider
    from context_ledger.memory import store
    from context_ledger.settings import get_settings

    provider = f"{HashingEmbeddingProvider.name}/{DEFAULT_DIMENSIONS}" if with_vectors else None
    params = {
        "space_id": fixture.space_id,
        "limit": get_settings().memory_max_candidates + 1,
        "provider": provider,
        "vector_bytes": 4 * DEFAULT_DIMENSIONS,
        "yes": b"\x01",
        "no": b"\x00",
    }
    started = time.perf_counter()
    with conn.cursor(row_factory=dict_row, binary=True) as cursor:
        row = cursor.execute(store._CANDIDATES, params).fetchone()
        if with_vectors and row is not None:
            cursor.execute(store._NEWEST_VECTORS, params).fetchone()
    return time.perf_counter() - started


# --- measurement --------------------------------------------------------------------------------


def cells(stats: Stats) -> str:
    """``p50/p95 mean`` in milliseconds, the table's columns for one side."""
    return f"{stats.p50:>7.1f}/{stats.p95:<7.1f} {stats.mean:>6.1f}"


@dataclass(frozen=True)
class Row:
    memories: int
    candidates: int
    mode: str
    bare: Stats
    handler: Stats
    overhead_ms: float

    def target(self) -> str:
        if self.memories != TARGET_SIZE:
            return ""
        return f"p95<={TARGET_P95_MS:g}ms {'ok' if self.handler.p95 <= TARGET_P95_MS else 'MISS'}"

    def line(self) -> str:
        return (
            f"{self.memories:>8,} {self.candidates:>10,} {self.mode:<6} {cells(self.bare)} "
            f"{cells(self.handler)} {self.overhead_ms:>8.1f} "
            f"{self.handler.p95 / self.bare.p95:>6.1f}x  {self.target()}"
        )


HEADER = (
    f"{'memories':>8} {'candidates':>10} {'mode':<6} {'bare p50/p95':>15} {'mean':>6} "
    f"{'handler p50/p95':>15} {'mean':>6} {'diff p50':>8} {'ratio':>7}  target"
)


def measure(
    url: str,
    handler: LambdaFunction,
    fixture: Fixture,
    queries: Sequence[str],
    *,
    size: int,
    mode: str,
) -> Row:
    """Warm up, then time each query through the handler and the bare SQL, alternating which
    goes first so neither always finds the other's pages freshly cached."""
    from context_ledger.settings import get_settings

    texts = [""] * len(queries) if mode == "empty" else list(queries)
    cold = mode == "cold"
    handler_seconds, bare_seconds = [], []
    with psycopg.connect(url, autocommit=True) as conn:
        for text in texts[:WARMUP]:
            call_handler(handler, relevant_event(fixture, text), cold=cold)
            bare_candidates(conn, fixture, with_vectors=mode != "empty")
        for index, text in enumerate(tqdm(texts[WARMUP:], desc=f"{size:,} {mode}", leave=False)):
            event = relevant_event(fixture, text)
            if index % 2:
                handler_seconds.append(call_handler(handler, event, cold=cold))
                bare_seconds.append(bare_candidates(conn, fixture, with_vectors=mode != "empty"))
            else:
                bare_seconds.append(bare_candidates(conn, fixture, with_vectors=mode != "empty"))
                handler_seconds.append(call_handler(handler, event, cold=cold))
    paired = [h - b for h, b in zip(handler_seconds, bare_seconds, strict=True)]
    return Row(
        size,
        min(size, get_settings().memory_max_candidates),
        mode,
        Stats.of(bare_seconds),
        Stats.of(handler_seconds),
        overhead_ms=statistics.median(paired) * 1000,
    )


def run(args: argparse.Namespace, url: str, report: Callable[[str], None]) -> list[Row]:
    texts = memory_texts(args.corpus)
    queries = load_queries(args.queries_file, args.queries + WARMUP)
    rng = random.Random(SEED)
    fixture = create_fixture(texts[0])
    handler = load_function("MemoryFunction")
    rows = []
    loaded = 1
    for size in sorted(args.sizes):
        started = time.perf_counter()
        load_memories(url, fixture, texts, loaded, size, rng)
        loaded = size
        report(f"# {size:,} memories loaded in {time.perf_counter() - started:.1f} s")
        for mode in ("query", "cold", "empty"):
            row = measure(url, handler, fixture, queries, size=size, mode=mode)
            rows.append(row)
            report(row.line())
    return rows


def parse_sizes(raw: str) -> list[int]:
    sizes = sorted({int(part.replace("_", "")) for part in raw.split(",") if part.strip()})
    if not sizes or sizes[0] < LIMIT:
        raise argparse.ArgumentTypeError(f"sizes are integers of at least {LIMIT}, e.g. 1000,10000")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=parse_sizes, default=[1_000, 10_000, 100_000], help="memories"
    )
    parser.add_argument("--queries", type=int, default=100, help="measured queries per row")
    parser.add_argument("--corpus", type=Path, default=DATA / "corpus.jsonl")
    parser.add_argument("--queries-file", type=Path, default=DATA / "queries.jsonl")
    parser.add_argument("--json", type=Path, help="also write the rows here (bench/suite.py)")
    args = parser.parse_args(argv)
    if args.queries < 2:
        parser.error("--queries must be at least 2")
    started = time.perf_counter()
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    # The truncation warning fires on every 100k call; keep the table readable.
    os.environ["POWERTOOLS_LOG_LEVEL"] = "ERROR"
    # The limits stay on, so each call pays for its counter, but are never reached.
    os.environ["VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE"] = "1000000"
    os.environ["KEYSTONE_RATE_LIMIT_ORG_PER_MINUTE"] = "100000000"
    for name in ("URL", "MODEL", "DIMENSIONS"):  # /relevant embeds in-process (hashing, 128d)
        os.environ.pop(f"KEYSTONE_CONTEXT_EMBEDDINGS_{name}", None)
    from ingest import scratch_database  # bench/ is the script's folder, first on sys.path

    with scratch_database() as url:
        print(HEADER)
        rows = run(args, url, lambda line: print(line, flush=True))
    misses = [row for row in rows if row.target().endswith("MISS")]
    print()
    print(
        f"target p95 <= {TARGET_P95_MS:g} ms at {TARGET_SIZE:,} memories: "
        + ("missed" if misses else "met" if any(r.target() for r in rows) else "not measured")
    )
    print(f"total {time.perf_counter() - started:.0f} s")
    write_results(args.json, {"queries": args.queries, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
