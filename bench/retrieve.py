"""Retrieve latency: the Lambda handler in-process against the bare candidate search SQL.

For each corpus size (default 10k and 100k chunks), search backend (``exact``, ``pgvector``) and
mode (``hybrid``: full-text + vector with query embeddings from the local stand-in server;
``full-text``: no embeddings endpoint) it measures, query by query and interleaved:

- ``handler``: ``functions/retrieve/app.py``'s ``handler(event, context)``, loaded by file path as
  the local runtime loads it, called with a real HTTP API payload 2.0 event whose
  ``requestContext.authorizer.lambda`` carries the caller (Mangum → FastAPI → the retrieve use
  case: space chain, sources, search, ranking, per-level cap, budget, chunk rows, attribution
  published to moto's SQS). Includes the query's embedding round trip to the stand-in (hybrid).
  The process-wide search cache is cleared before every call, so no query is answered from it.
- ``bare``: the candidate search statements the search step sends, executed directly with
  psycopg on another connection: no Python ranking, budget, HTTP or queue. First the query terms'
  BM25 statistics (with the sources' current versions for HNSW), then, in one pipeline (one round
  trip), a full-text top 100 and in hybrid mode a vector top 100 per search: one search per level
  of the chain since 5b872c4 (six statements, hybrid, on this three-level chain), one over all of
  the chain's sources before. The searches are taken from the handler itself (its arguments to
  ``search_candidates`` for a probe query) and their statements recorded as ``search_candidates``
  sends them, so the bare search follows whichever checkout runs it. Each search's terms are
  computed from the first statement's rows as the search step computes them (microseconds).
  Query vectors are computed beforehand with the same hashing provider. (The handler sends the
  vector statements on a second connection, beside the text ones and the smallest level's vector
  statement; the bare search sends all of them on one, as the handler does without a spare
  connection.)

It prints p50/p95/p99/mean of both, the median of the per-query differences (``diff p50``: the
handler's own cost, which drift between queries does not blur), the handler/bare ratio of the
p95s, and checks the targets
(reported, not asserted): handler p95 at most 2x the bare query's; pgvector hybrid p95 at most
30 ms at 100k chunks. The network calls inside the handler are also timed alone: the query
embedding and a bare SQS ``send_message`` (on the SQS server used, and on moto's own).

Two stand-in artefacts are kept out of the figures, as neither exists in production:

- moto's own server (werkzeug's development server before a dispatcher for every AWS service)
  closes the connection after each answer and finds the service by scanning moto's package per
  request, about 1.7 ms of each publish; real SQS keeps the connection botocore reuses. The bench
  serves moto's SQS application over kept-alive HTTP instead, as the local runtime does
  (``local/sqs_server.py``); the last rows show a publish on both;
- moto's ``send_message`` slows down as a queue fills (~15 ms per 1,000 messages held), so the
  attribution queue is replaced every 25 messages, outside the timed calls.

Data: passages of 1 to 4 consecutive sentences of the BEIR SciFact abstracts (read from
``/work/shared/data/scifact/corpus.jsonl``, never copied), shuffled with a fixed seed (a size
beyond the ~149k distinct passages cycles them with a variant suffix), embedded with the hashing
provider. One organisation > team > project chain, each space with one published docs source:
the organisation's wiki holds 70% of the chunks, the team's docs 20%, the project's 10%
(``LEVEL_SHARES``; chunk ``n`` by ``n % 10``); retrievals name the project (``spaceId``), as a
user granted search on the organisation, so every level is searched. The first size's rows are
bulk-loaded (binary ``COPY`` into a staging table, ``to_tsvector('english', ...)`` on insert);
each larger size appends to the same index versions; after each load ``VACUUM ANALYZE`` and the
HNSW indexes (``search.vectors.ensure_vector_index``, built with a larger ``maintenance_work_mem``
for the session) are done before measuring. The embedded server's buffer cache holds the 100k
chunks and their indexes (``local/postgres.py``); with a ``DATABASE_URL`` the server's own
``shared_buffers`` decides. Queries: SciFact claims.

    .venv/bin/python bench/retrieve.py                              # 10k and 100k, 100 queries
    .venv/bin/python bench/retrieve.py --sizes 10000 --queries 50   # a quicker run
    .venv/bin/python bench/retrieve.py --sizes 100000 --backends pgvector  # the latency target

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from bench_support import LambdaFunction, Stats, load_function, load_queries, write_results
from psycopg import sql
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "scifact"
ROUTE_KEY = "POST /api/v1/context/retrieve"
SEED = 20260101
#: Requests before the timed ones, per row (each row starts on a new pool). A handler on new
#: connections takes ~30 requests to settle: prepared statements (psycopg prepares on the fifth
#: execution, per connection, and the request and side searches alternate between the pool's
#: connections), PostgreSQL's plan choice after five custom plans, each new backend's catalog
#: caches. Full-text at 100k, median of six new pools: requests 5-10 21.1 ms, 10-15 19.1, 20-30
#: 18.2, 30-60 17.3. A warm Lambda environment serves far more requests than that; its first
#: ones are the cold start's (bench/coldstart.py).
WARMUP = 30
ROTATE_AFTER = 25
TARGET_RATIO = 2.0
TARGET_PGVECTOR_P95_MS = 30.0
TARGET_PGVECTOR_CHUNKS = 100_000
BUILD_MAINTENANCE_WORK_MEM = "1GB"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")
WINDOWS = (1, 2, 3, 4)


# --- data ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Passage:
    path: str
    title: str
    content: str


def corpus_passages(corpus: Path) -> list[Passage]:
    """Every window of 1 to 4 consecutive sentences of every abstract, in a fixed random order."""
    passages = []
    with corpus.open() as handle:
        for line in handle:
            record = json.loads(line)
            sentences = SENTENCE_END.split(record["text"].strip())
            for width in WINDOWS:
                for start in range(len(sentences) - width + 1):
                    passages.append(
                        Passage(
                            f"{record['_id']}.md",
                            record.get("title", ""),
                            " ".join(sentences[start : start + width]),
                        )
                    )
    random.Random(SEED).shuffle(passages)
    return passages


def passage_at(passages: Sequence[Passage], ordinal: int) -> Passage:
    """The ``ordinal``-th chunk's passage; beyond the pool, a variant of a passage."""
    passage = passages[ordinal % len(passages)]
    cycle = ordinal // len(passages)
    if cycle == 0:
        return passage
    return Passage(passage.path, passage.title, f"{passage.content} (variant {cycle})")


# --- fixture: organisation, spaces, grant, sources ----------------------------------------------

#: The chain the bench retrieves from, top first: each level's space holds one published docs
#: source, and chunk ``n`` goes to the level whose share holds ``n % 10``: an organisation wiki
#: with most of the corpus, a team's docs, a project's own. Retrievals name the project, so the
#: search step searches three levels, each for its own candidates since 5b872c4.
LEVEL_SHARES = (("organisation", 7), ("team", 2), ("project", 1))  # tenths of the corpus


@dataclass(frozen=True)
class LevelSource:
    level: str
    space_id: uuid.UUID
    source_id: uuid.UUID
    version: int


@dataclass(frozen=True)
class Fixture:
    org_id: uuid.UUID
    project_id: uuid.UUID
    sources: tuple[LevelSource, ...]  # top level first, as LEVEL_SHARES
    caller: Any  # context_ledger.auth.principal.Principal

    @property
    def source_ids(self) -> list[uuid.UUID]:
        return [source.source_id for source in self.sources]

    def source_of(self, ordinal: int) -> LevelSource:
        """The source (level) chunk ``ordinal`` belongs to."""
        slot, bound = ordinal % 10, 0
        for source, (_, tenths) in zip(self.sources, LEVEL_SHARES, strict=True):
            bound += tenths
            if slot < bound:
                return source
        raise AssertionError("LEVEL_SHARES must add up to 10")


def _admin(org_id: uuid.UUID) -> Any:
    from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal

    return Principal(
        org_id=org_id, user_id="admin", client_id="bench", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


def create_fixture() -> Fixture:
    """Organisation > team > project through the real use cases; a docs source in each, its
    first build open; alice may search the organisation (and so every space below it)."""
    from context_ledger.auth.principal import Principal
    from context_ledger.db import connection
    from context_ledger.dlp.classification import Classification
    from context_ledger.sources import service
    from context_ledger.sources.model import SourceKind
    from context_ledger.spaces.levels import Level
    from context_ledger.spaces.permissions import Permission
    from context_ledger.spaces.service import create_organisation, create_space, set_grants

    with connection() as conn:
        org = create_organisation(conn, name="bench retrieve")
        admin = _admin(org.id)
        team = create_space(conn, admin, name="Research", level=Level.TEAM, parent_id=org.space_id)
        project = create_space(conn, admin, name="SciFact", level=Level.PROJECT, parent_id=team.id)
        set_grants(
            conn,
            admin,
            space_id=org.space_id,
            subject="user:alice",
            permissions=[Permission.SEARCH],
        )
        spaces = {"organisation": org.space_id, "team": team.id, "project": project.id}
        names = {"organisation": "wiki", "team": "team docs", "project": "scifact"}
        sources = []
        for level, _ in LEVEL_SHARES:
            source = service.create_source(
                conn,
                admin,
                space_id=spaces[level],
                kind=SourceKind.DOCS,
                name=names[level],
                classification=Classification.INTERNAL,
            )
            version = service.open_build(conn, admin, source["id"])["version"]
            sources.append(LevelSource(level, spaces[level], source["id"], version))
    caller = Principal(
        org_id=org.id,
        user_id="alice",
        client_id="context-ledger-bench",
        scopes=frozenset({"context:space:search"}),
        groups=frozenset({"researchers"}),
    )
    return Fixture(org.id, project.id, tuple(sources), caller)


def publish(fixture: Fixture) -> None:
    from context_ledger.db import connection
    from context_ledger.sources import service

    admin = _admin(fixture.org_id)
    with connection() as conn:
        for source in fixture.sources:
            service.publish_build(conn, admin, source.source_id, source.version)


# --- bulk load ----------------------------------------------------------------------------------

_CREATE_STAGE = """
CREATE TEMP TABLE bench_chunk_load (
    id uuid, source_id uuid, index_version integer, ordinal integer, path text, content text,
    content_sha256 bytea, token_count integer, search_text text, embedding real[], metadata jsonb
) ON COMMIT DROP
"""
_COPY_STAGE = """
COPY bench_chunk_load (id, source_id, index_version, ordinal, path, content, content_sha256,
                       token_count, search_text, embedding, metadata) FROM STDIN (FORMAT BINARY)
"""
_STAGE_TYPES = [
    "uuid",
    "uuid",
    "int4",
    "int4",
    "text",
    "text",
    "bytea",
    "int4",
    "text",
    "float4[]",
    "jsonb",
]
_INSERT_FROM_STAGE = """
INSERT INTO chunks (id, org_id, source_id, index_version, ordinal, path, language, content,
                    content_sha256, token_count, tsv, embedding, embedding_model, metadata)
SELECT id, %(org_id)s, source_id, index_version, ordinal, path, 'markdown', content,
       content_sha256, token_count, to_tsvector('english', search_text), embedding, %(model)s,
       metadata
FROM bench_chunk_load
"""


def load_chunks(
    url: str, fixture: Fixture, passages: Sequence[Passage], start: int, stop: int, dims: int
) -> None:
    """Append chunks ``start`` to ``stop`` to the builds of the fixture's levels, each chunk to
    its level's (``Fixture.source_of``; one transaction)."""
    from psycopg.types.json import Jsonb

    from context_ledger.embeddings.hashing import HashingEmbeddingProvider
    from context_ledger.sources.chunking.identifiers import search_text
    from context_ledger.text.tokens import count_tokens

    embedder = HashingEmbeddingProvider(dims)
    with psycopg.connect(url) as conn:
        conn.execute(_CREATE_STAGE)
        with conn.cursor() as cursor, cursor.copy(_COPY_STAGE) as copy:
            copy.set_types(_STAGE_TYPES)
            for ordinal in tqdm(range(start, stop), desc=f"load chunks to {stop:,}", leave=False):
                passage = passage_at(passages, ordinal)
                source = fixture.source_of(ordinal)
                copy.write_row(
                    (
                        uuid.uuid4(),
                        source.source_id,
                        source.version,
                        ordinal,
                        passage.path,
                        passage.content,
                        hashlib.sha256(passage.content.encode()).digest(),
                        count_tokens(passage.content),
                        search_text(passage.content, code=False),
                        embedder.embed_text(passage.content),
                        Jsonb({"headings": [passage.title]}),
                    )
                )
        params = {"org_id": fixture.org_id, "model": f"hashing-{dims}"}
        conn.execute(_INSERT_FROM_STAGE, params)


def prepare_indexes(url: str, dims: int) -> None:
    """VACUUM ANALYZE (statistics, GIN pending list, visibility map), then the HNSW index, then a
    checkpoint: the load and the index build leave hundreds of MB of dirty buffers, which the
    checkpointer would otherwise write out, spread over minutes, while the first rows are timed."""
    from context_ledger.search.vectors import ensure_vector_index

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE chunks")
        conn.execute(
            sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(BUILD_MAINTENANCE_WORK_MEM))
        )
        ensure_vector_index(conn, dims)
        try:
            conn.execute("CHECKPOINT")
        except psycopg.errors.InsufficientPrivilege:
            print("  (no CHECKPOINT: the role may not; the first rows may time the checkpointer)")


def drop_vector_index(url: str, dims: int) -> None:
    """Appending to an HNSW-indexed table is slow; the indexes are rebuilt after the load."""
    from context_ledger.search.vectors import index_name
    from context_ledger.spaces.levels import Level

    with psycopg.connect(url, autocommit=True) as conn:
        for level in Level:
            name = sql.Identifier(index_name(dims, level))
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(name))


# --- services the handler talks to --------------------------------------------------------------


class AttributionQueues:
    """Attribution queues on moto's SQS, rotated every :data:`ROTATE_AFTER` messages.

    moto's ``send_message`` slows down as its queue fills (about 15 ms more per 1,000 messages
    held), which real SQS does not; a fresh queue now and then keeps the publish cost flat.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self._queues = 0
        self._sent = ROTATE_AFTER
        self.url = ""

    def next_message(self) -> str:
        """Call before each publish (outside any timing); the queue to publish to."""
        from context_ledger.settings import get_settings

        if self._sent >= ROTATE_AFTER:
            self._queues += 1
            name = f"bench-attribution-{self._queues}"
            self.url = self.client.create_queue(QueueName=name)["QueueUrl"]
            os.environ["KEYSTONE_ATTRIBUTION_QUEUE_URL"] = self.url
            get_settings.cache_clear()
            get_settings()  # read here, not inside the next timed call
            self._sent = 0
        self._sent += 1
        return self.url


@contextmanager
def sqs_server() -> Iterator[AttributionQueues]:
    """moto's SQS on loopback, as the local runtime serves it (local/sqs_server.py)."""
    import boto3

    from context_ledger.local.sqs_server import serve_sqs

    with serve_sqs() as server:
        os.environ["AWS_ENDPOINT_URL_SQS"] = server.url
        queues = AttributionQueues(boto3.client("sqs"))
        queues.next_message()
        yield queues


@contextmanager
def moto_server_queues() -> Iterator[AttributionQueues]:
    """Attribution queues on moto's own server (as tests/conftest.py starts it), for comparison."""
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        queues = AttributionQueues(boto3.client("sqs", endpoint_url=f"http://{host}:{port}"))
        queues.next_message()
        yield queues
    finally:
        server.stop()


def configure(*, backend: str, embeddings_url: str | None, dims: int) -> None:
    """Point the handler's settings at a backend and (or no) embeddings endpoint."""
    from context_ledger.settings import get_settings

    os.environ["KEYSTONE_CONTEXT_SEARCH_BACKEND"] = backend
    if embeddings_url is None:
        for name in ("URL", "MODEL", "DIMENSIONS"):
            os.environ.pop(f"KEYSTONE_CONTEXT_EMBEDDINGS_{name}", None)
    else:
        os.environ["KEYSTONE_CONTEXT_EMBEDDINGS_URL"] = embeddings_url
        os.environ["KEYSTONE_CONTEXT_EMBEDDINGS_MODEL"] = f"hashing-{dims}"
        os.environ["KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS"] = str(dims)
    get_settings.cache_clear()  # the embeddings client follows the settings


# --- the handler --------------------------------------------------------------------------------


def retrieve_event(fixture: Fixture, query: str) -> dict[str, Any]:
    """A payload 2.0 event for ``POST /api/v1/context/retrieve`` with the authorizer context."""
    from context_ledger.local.events import ApiInfo, HttpRequest, Stamp, http_event

    body = {
        "query": query,
        "spaceId": str(fixture.project_id),
        "tokenBudget": 4096,
        "maxPerLevel": 5,
        "excludeRelated": False,
        "sourceKinds": ["codebase", "docs"],
    }
    request = HttpRequest(
        method="POST",
        target="/api/v1/context/retrieve",
        headers=[
            ("host", "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"),
            ("content-type", "application/json"),
            ("accept", "application/json"),
            ("user-agent", "context-ledger-bench/1"),
            ("x-keystone-client", "bench/1.0"),
        ],
        body=json.dumps(body).encode(),
    )
    return http_event(
        request,
        route_key=ROUTE_KEY,
        path_parameters={},
        api=ApiInfo(api_id="a1b2c3d4e5", region="us-east-1"),
        stamp=Stamp.new(),
        authorizer_context=fixture.caller.to_authorizer_context(),
    )


def call_handler(
    handler: LambdaFunction, event: dict[str, Any], queues: AttributionQueues
) -> float:
    """Seconds one call takes, the search cache cleared first; raises unless it answered 200."""
    from context_ledger.http.retrieve import _CACHE

    _CACHE.clear()
    queues.next_message()
    context = handler.context()
    started = time.perf_counter()
    response = handler.handler(event, context)
    seconds = time.perf_counter() - started
    if response.get("statusCode") != 200:
        raise RuntimeError(
            f"retrieve answered {response.get('statusCode')}: {response.get('body')}"
        )
    return seconds


# --- the bare query -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    text: str
    #: the sources of the search whose parameters it binds; None: unbound (the HNSW settings)
    part: frozenset[uuid.UUID] | None
    text_search: bool  # sent only when its search matches a term (fulltext.pending_text_search)


def per_level() -> bool:
    """Whether this checkout searches each level of the chain on its own (5b872c4 and after):
    its term counts come per source, and ``search_candidates`` takes a list of searches."""
    from context_ledger.search import fulltext

    return hasattr(fulltext, "TermCounts")


@dataclass(frozen=True)
class BareSearch:
    """The candidate statements the search step sends for one backend and mode, as SQL text:
    one text statement and (hybrid) one vector statement per search, a search per level of the
    chain (before 5b872c4, one over all of the chain's sources).

    Its first step reads the query terms' statistics (and, for the HNSW statement, the sources'
    current versions), because the statements after it bind what it read; from its rows each
    search gets its terms (the BM25 weights of all searched sources, the matched terms of its own
    level's) as the search step does, in microseconds. Then the statements of every search are
    sent together, synchronised once and read after the pipeline: one round trip and one implicit
    transaction, so the HNSW settings apply to the searches as in the handler. (The handler sends
    the larger levels' vector statements on a second connection when it has a spare one.)
    """

    statements: list[Statement]
    parts: list[tuple[uuid.UUID, ...]]  # each search's sources, as the service split them
    versions: bool  # the first step reads the sources' current versions too

    def searches(self, conn: psycopg.Connection, query: Any) -> list[Any]:
        """The first step: the searches with their terms (and versions), one round trip."""
        from context_ledger.search.candidates import with_terms

        if not per_level():
            return [with_terms(conn, query, versions=self.versions)]
        from dataclasses import replace

        from context_ledger.search.fulltext import pending_text_terms
        from context_ledger.sources.searchable import pending_current_versions

        with conn.pipeline():
            counts = pending_text_terms(conn, query)
            if self.versions:
                current = pending_current_versions(
                    conn, org_id=query.org_id, source_ids=list(query.source_ids)
                )
        terms, versions = counts.result(), current.result() if self.versions else {}
        searched = list(query.source_ids)
        return [
            replace(
                query,
                source_ids=list(part),
                terms=terms.terms(searched, matched_in=list(part)),
                versions={id: versions[id].version for id in part if id in versions},
                levels={id: versions[id].level for id in part if id in versions},
            )
            for part in self.parts
        ]

    def run(self, conn: psycopg.Connection, query: Any) -> float:
        """Seconds for the statements on ``conn`` (in autocommit mode, as the handler's)."""
        started = time.perf_counter()
        params = {frozenset(s.source_ids): s.params() for s in self.searches(conn, query)}
        with conn.pipeline():
            sent = [
                conn.execute(
                    statement.text, None if statement.part is None else params[statement.part]
                )
                for statement in self.statements
                if not statement.text_search or params[statement.part]["match"] is not None
            ]
        for cursor in sent:
            cursor.fetchall()
        return time.perf_counter() - started


def search_query(fixture: Fixture, text: str, vector: list[float] | None) -> Any:
    """The search step's inputs for ``text`` over every source of the chain, before its terms are
    looked up."""
    from context_ledger.retrieval.service import CANDIDATES
    from context_ledger.search.query import SearchQuery

    return SearchQuery(fixture.org_id, fixture.source_ids, text, vector, CANDIDATES)


def service_searches(
    handler: LambdaFunction, event: dict[str, Any], queues: AttributionQueues
) -> Any:
    """What the handler's search step passes to ``search_candidates`` for ``event`` (one call):
    a list of searches, one per level of the chain, or before 5b872c4 one search."""
    from context_ledger.retrieval import service

    seen: list[Any] = []
    original = service.search_candidates

    def recording(conn, searches, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(searches)
        return original(conn, searches, **kwargs)

    service.search_candidates = recording
    try:
        call_handler(handler, event, queues)
    finally:
        service.search_candidates = original
    if not seen:
        raise RuntimeError("the handler did not search")
    return seen[-1]


def capture_bare_search(
    url: str,
    handler: LambdaFunction,
    queues: AttributionQueues,
    fixture: Fixture,
    probes: Sequence[str],
    *,
    backend: str,
    hybrid: bool,
) -> BareSearch:
    """Record the statements ``search_candidates`` sends for the searches the handler built (the
    second call: per-process lookups are cached; on one connection, so all in one pipeline),
    on the first probe query whose every search matches a term."""
    from context_ledger.search.candidates import search_candidates
    from context_ledger.search.query import SearchQuery
    from context_ledger.settings import SearchBackend, get_settings

    recorded: list[Statement] = []

    class Recording(psycopg.Cursor):
        def execute(self, query, params=None, **kwargs):  # type: ignore[no-untyped-def]
            text = query if isinstance(query, str) else query.as_string(self.connection)
            part = None if params is None else frozenset(params["source_ids"])
            recorded.append(Statement(text, part, "%(match)s" in text))
            return super().execute(query, params, **kwargs)

    for probe in probes:
        event = retrieve_event(fixture, probe)
        searches = service_searches(handler, event, queues)
        listed = [searches] if isinstance(searches, SearchQuery) else list(searches)
        parts = [tuple(s.source_ids) for s in listed]
        with psycopg.connect(url, cursor_factory=Recording) as conn:
            for _ in range(2):
                recorded.clear()
                search_candidates(
                    conn,
                    searches,
                    backend=SearchBackend(backend),
                    ef_search=get_settings().hnsw_ef_search,  # the handler's
                )
                conn.rollback()
        texts = {s.part for s in recorded if s.text_search}
        if texts == {frozenset(part) for part in parts}:
            return BareSearch(
                list(recorded),
                parts,
                versions=hybrid and backend == "pgvector",
            )
    raise RuntimeError("no probe query matched a term at every level")


# --- measurement --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    chunks: int
    backend: str
    mode: str
    bare: Stats
    handler: Stats
    #: median of handler - bare, query by query: the handler's own cost, robust to drift
    overhead_ms: float
    #: the searches of the step (one per level of the chain since 5b872c4) and the candidate
    #: statements the bare search sends for them in its one pipeline (HNSW settings apart)
    searches: int = 1
    statements: int = 1

    @property
    def ratio(self) -> float:
        return self.handler.p95 / self.bare.p95

    def targets(self) -> list[tuple[str, bool]]:
        checks = [(f"<={TARGET_RATIO:g}x", self.ratio <= TARGET_RATIO)]
        if (
            self.backend == "pgvector"
            and self.mode == "hybrid"
            and self.chunks >= TARGET_PGVECTOR_CHUNKS
        ):
            within = self.handler.p95 <= TARGET_PGVECTOR_P95_MS
            checks.append((f"p95<={TARGET_PGVECTOR_P95_MS:g}ms", within))
        return checks

    def line(self) -> str:
        target = " ".join(f"{name} {'ok' if met else 'MISS'}" for name, met in self.targets())
        return (
            f"{self.chunks:>7} {self.backend:<8} {self.mode:<9} "
            f"{f'{self.searches}/{self.statements}':>5} {self.bare.cells()} "
            f"{self.handler.cells()} {self.overhead_ms:>8.1f} {self.ratio:>8.2f}x  {target}"
        )


HEADER = (
    f"{'chunks':>7} {'backend':<8} {'mode':<9} {'s/st':>5} "
    f"{'bare p50/p95':>15} {'p99/mean ms':<15} "
    f"{'handler p50/p95':>15} {'p99/mean ms':<15} {'diff p50':>8} {'ratio p95':>9}  target"
)


@dataclass(frozen=True)
class Workload:
    fixture: Fixture
    warmup: list[str]
    queries: list[str]
    vectors: dict[str, list[float]]


def measure(
    url: str,
    handler: LambdaFunction,
    workload: Workload,
    queues: AttributionQueues,
    *,
    chunks: int,
    backend: str,
    mode: str,
) -> Row:
    """Warm up, then time each query through the handler and the bare search, alternating
    which goes first so neither always finds the other's pages freshly cached.

    Both start on new connections: a server-side prepared statement keeps the custom plan costs
    of its earlier executions, so a pooled connection that ran the same statement on a smaller
    table would pick its plans (custom or generic) on stale averages while the bare one did not.
    """
    from context_ledger.db import close_pool

    close_pool()
    hybrid = mode == "hybrid"
    fixture = workload.fixture

    def vector(text: str) -> list[float] | None:
        return workload.vectors[text] if hybrid else None

    bare = capture_bare_search(
        url, handler, queues, fixture, workload.warmup, backend=backend, hybrid=hybrid
    )
    handler_seconds, bare_seconds = [], []
    with psycopg.connect(url, autocommit=True) as conn:
        for text in workload.warmup:
            call_handler(handler, retrieve_event(fixture, text), queues)
            bare.run(conn, search_query(fixture, text, vector(text)))
        label = f"{chunks:,} {backend} {mode}"
        for index, text in enumerate(tqdm(workload.queries, desc=label, leave=False)):
            event = retrieve_event(fixture, text)
            query = search_query(fixture, text, vector(text))
            if index % 2:
                handler_seconds.append(call_handler(handler, event, queues))
                bare_seconds.append(bare.run(conn, query))
            else:
                bare_seconds.append(bare.run(conn, query))
                handler_seconds.append(call_handler(handler, event, queues))
    paired = [h - b for h, b in zip(handler_seconds, bare_seconds, strict=True)]
    return Row(
        chunks,
        backend,
        mode,
        Stats.of(bare_seconds),
        Stats.of(handler_seconds),
        overhead_ms=statistics.median(paired) * 1000,
        searches=len(bare.parts),
        statements=sum(statement.part is not None for statement in bare.statements),
    )


def time_calls(call: Callable[[str], object], queries: Sequence[str]) -> Stats:
    for text in queries[:WARMUP]:
        call(text)
    seconds = []
    for text in queries:
        started = time.perf_counter()
        call(text)
        seconds.append(time.perf_counter() - started)
    return Stats.of(seconds)


def component_costs(
    server: Any, queues: AttributionQueues, queries: Sequence[str], dims: int
) -> list[tuple[str, Stats]]:
    """The network calls inside the handler, alone: query embedding (through the DLP gate, as
    the handler does: redaction included) and SQS publish (on the SQS server the handler used,
    and on moto's own)."""
    from context_ledger.dlp.gate import EmbeddingGate
    from context_ledger.dlp.policy import DlpPolicy
    from context_ledger.embeddings.client import EmbeddingsClient

    client = EmbeddingsClient(server.url, f"hashing-{dims}", dimensions=dims)
    gate = EmbeddingGate(client=client, policy=DlpPolicy(), external=False)
    costs = [("embedding, stand-in server", time_calls(gate.embed_query_text, queries))]
    client.close()
    body = json.dumps(
        {"record": {"chunks": [{"chunkId": str(uuid.uuid4())}] * 5}, "pad": "x" * 900}
    )
    costs.append(("SQS send_message, sqs_server.py (used)", time_sends(queues, body, queries)))
    with moto_server_queues() as on_moto:
        costs.append(("SQS send_message, moto's own server", time_sends(on_moto, body, queries)))
    return costs


def time_sends(queues: AttributionQueues, body: str, queries: Sequence[str]) -> Stats:
    """``send_message`` as the handler calls it (botocore client included), once per query."""
    seconds = []
    for index in range(WARMUP + len(queries)):
        queue_url = queues.next_message()
        started = time.perf_counter()
        queues.client.send_message(QueueUrl=queue_url, MessageBody=body)
        if index >= WARMUP:
            seconds.append(time.perf_counter() - started)
    return Stats.of(seconds)


def run(args: argparse.Namespace, url: str, report: Callable[[str], None]) -> list[Row]:
    from context_ledger.embeddings.hashing import HashingEmbeddingProvider
    from context_ledger.local.embeddings_server import serve_embeddings

    passages = corpus_passages(args.corpus)
    texts = load_queries(args.queries_file, args.queries + WARMUP)
    provider = HashingEmbeddingProvider(args.dims)
    fixture = create_fixture()
    workload = Workload(
        fixture,
        warmup=texts[:WARMUP],
        queries=texts[WARMUP:],
        vectors={text: provider.embed_text(text) for text in texts},
    )
    rows: list[Row] = []
    loaded = 0
    with sqs_server() as queues, serve_embeddings(dims=args.dims) as server:
        configure(backend="exact", embeddings_url=server.url, dims=args.dims)
        handler = load_function("RetrieveFunction")
        for size in sorted(args.sizes):
            started = time.perf_counter()
            drop_vector_index(url, args.dims)
            load_chunks(url, fixture, passages, loaded, size, args.dims)
            if loaded == 0:
                publish(fixture)
            loaded = size
            prepare_indexes(url, args.dims)
            report(f"# {size:,} chunks loaded and indexed in {time.perf_counter() - started:.1f} s")
            for backend in args.backends:
                for mode in ("hybrid", "full-text"):
                    embeddings_url = server.url if mode == "hybrid" else None
                    configure(backend=backend, embeddings_url=embeddings_url, dims=args.dims)
                    row = measure(
                        url, handler, workload, queues, chunks=size, backend=backend, mode=mode
                    )
                    rows.append(row)
                    report(row.line())
        report("")
        report(f"{'inside the handler, measured alone':<44} {'p50/p95 ms':>15} {'p99/mean':>15}")
        costs = component_costs(server, queues, workload.queries, args.dims)
        for name, stats in costs:
            report(f"{name:<44} {stats.cells(2)}")
    return rows


def summary(rows: Sequence[Row]) -> str:
    misses = [
        f"{row.chunks:,} {row.backend} {row.mode}: {name}"
        for row in rows
        for name, met in row.targets()
        if not met
    ]
    if not misses:
        return (
            f"targets met: every handler p95 <= {TARGET_RATIO:g}x bare; pgvector hybrid p95 <="
            f" {TARGET_PGVECTOR_P95_MS:g} ms at {TARGET_PGVECTOR_CHUNKS:,} chunks"
        )
    return "targets missed: " + "; ".join(misses)


def parse_sizes(raw: str) -> list[int]:
    sizes = sorted({int(part.replace("_", "")) for part in raw.split(",") if part.strip()})
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("sizes are positive integers, e.g. 10000,100000")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=[10_000, 100_000], help="chunks")
    parser.add_argument("--queries", type=int, default=100, help="measured queries per row")
    parser.add_argument("--dims", type=int, default=384, help="embedding dimensions")
    parser.add_argument(
        "--backends",
        type=lambda raw: [b for b in ("exact", "pgvector") if b in raw.split(",")],
        default=["exact", "pgvector"],
        help="comma-separated: exact, pgvector (default both)",
    )
    parser.add_argument("--corpus", type=Path, default=DATA / "corpus.jsonl")
    parser.add_argument("--queries-file", type=Path, default=DATA / "queries.jsonl")
    parser.add_argument("--json", type=Path, help="also write the rows here (bench/suite.py)")
    args = parser.parse_args(argv)
    if args.queries < 2:
        parser.error("--queries must be at least 2")
    started = time.perf_counter()
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    # moto only: never real AWS credentials, whatever the environment holds.
    os.environ.update(
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",  # noqa: S106 (moto's dummy key)
    )
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    from ingest import scratch_database  # bench/ is the script's folder, first on sys.path

    from context_ledger.settings import load_settings

    ef_search = load_settings().hnsw_ef_search  # not cached: DATABASE_URL is not set yet
    with scratch_database() as url:
        print(f"pgvector rows: hnsw.ef_search {ef_search} (KEYSTONE_CONTEXT_HNSW_EF_SEARCH)")
        chain = ", ".join(f"{level} {tenths * 10}%" for level, tenths in LEVEL_SHARES)
        print(f"chain searched from the project: {chain} of the chunks;", end=" ")
        print("s/st: searches / candidate statements of the bare search")
        print(HEADER)
        rows = run(args, url, lambda line: print(line, flush=True))
    print()
    print(summary(rows))
    print(f"total {time.perf_counter() - started:.0f} s")
    figures = {
        "queries": args.queries,
        "dims": args.dims,
        "ef_search": ef_search,
        "levels": dict(LEVEL_SHARES),
        "rows": rows,
    }
    write_results(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
