"""Load test: concurrent clients against the local runtime, then the evidence reconciled.

The local runtime (``template.yaml`` served on loopback: API Gateway, the authorizer, every
function, moto SQS polled into the attribution writer) runs in this process over a scratch
database, with two stand-ins on loopback: the hashing embeddings server (so retrieval and
``/relevant`` are hybrid, as with a configured endpoint) and the echo model provider behind the
model gateway. It seeds one organisation: a department > team > project hierarchy, this
repository's code (project) and docs (team) and ``../shared/design`` (department) indexed through
the HTTP ingest pipeline, and memories in a memory project; four users may search all of it.

Lambda runs each concurrent request, and each writer batch, in an execution environment of its
own with its own connection pool (``KEYSTONE_DB_POOL_MAX``, 4); the local runtime serves every
function from one process and one pool, where 32 requests in flight starve the attribution
writer of connections and of the interpreter. So the runtime's pool is sized to the concurrency
(``--pool-max``, default clients + 8), and ``--writers`` (default 2) more processes poll the
attribution queue into the writer's handler, as Lambda scales the writer out;
``--writers 0 --pool-max 4`` shows the one-process artefact.

The clients run in a child process (asyncio + httpx), so they do not share the runtime's
interpreter lock. Each client is one of the users and loops until the time is up, choosing per
request (weights in ``MIX``):

- ``retrieve``: ``POST /api/v1/context/retrieve`` with a query on the project;
- ``relevant``: ``GET /api/context/{project}/relevant?query=...``;
- ``attribution``: ``GET /api/v1/context/attributions/{requestId}`` of one of its own retrievals
  answered at least ``ATTRIBUTION_READ_AGE`` seconds earlier (a ``404`` here means the record
  had not landed yet);
- ``gateway``: ``POST /api/v1/models/chat/completions`` naming its latest retrieval in
  ``X-Keystone-Context-Request-Id`` (the link outcome header is counted).

Two phases: a baseline with one client (the unloaded latency of each endpoint, same run, same
data), then the load (``--clients``, ``--seconds``). Printed: throughput, p50/p95/p99 per endpoint
next to the baseline's, answers by status (and error code), the gateway's link outcomes, the time
from a retrieval's answer to its evidence record landing (every ``LAG_SAMPLE_EVERY``-th retrieval;
its attribution id polled in the ``attributions`` table every 50 ms), and the attribution queue's
backlog and age of its oldest message, sampled every second. moto does not implement the
``ApproximateAgeOfOldestMessage`` CloudWatch metric, so the age is read from the sent timestamps
in moto's in-process store (in-flight messages included, as the metric does).

Afterwards it waits (``--drain-timeout``) for the attribution queue to drain, then checks:

- every organisation chain verifies in full (``verify_chain(full=True)``);
- retrievals answered ``200`` = attribution records + dead-letter messages, exactly, and the
  answered attribution ids without a record are exactly as many as the dead letters.

Exit status 1 if any answer was a ``500`` (an internal error is a bug at any load), the queue
does not drain in time, a chain fails or the counts differ.

    .venv/bin/python bench/load.py                            # 32 clients, 60 s
    .venv/bin/python bench/load.py --clients 8 --seconds 20   # quicker

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import queue
import random
import secrets
import statistics
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import psycopg

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
DESIGN_DOCS = REPO.parent / "shared" / "design"
USERS = ("alice", "bob", "carol", "dave")
MEMORY_PROJECT = "load-bench"
ATTRIBUTION_QUEUE = "AttributionQueue"
WRITER_FUNCTION = "AttributionWriterFunction"
EMBEDDINGS_DIMENSIONS = 128
MIX = {"retrieve": 0.4, "relevant": 0.25, "attribution": 0.15, "gateway": 0.2}
ENDPOINTS = tuple(MIX)
#: A client reads the attributions of its retrievals answered at least this long ago.
ATTRIBUTION_READ_AGE = 2.0
LAG_SAMPLE_EVERY = 3
LAG_POLL_SECONDS = 0.05
PROGRESS_SECONDS = 5.0
CLIENT_TIMEOUT_SECONDS = 60.0
CHAT_MODEL = "echo-1"

QUERIES = (
    "how is the evidence chain verified",
    "who may search a space grant inheritance",
    "split identifiers for full text search",
    "attribution record queued before the answer leaves",
    "token budget fitting of ranked chunks",
    "level weights per organisation overrides",
    "redact secrets before sending to embeddings endpoint",
    "checkpoint stored outside the database",
    "memory relevance score recency importance frequency",
    "model gateway links a call to its retrieval",
    "api key hashed verification",
    "index version publish conflict",
    "local runtime polls the queue into the writer",
    "pgvector hnsw search filters",
    "related code callers callees tests",
    "rate limit per api key memory",
    "dead letter queue redrive attribution",
    "jwt authorizer issuer audience",
    "bm25 rarest query terms normalised",
    "chunking python functions by symbol",
)


# --- the clients (child process) -------------------------------------------------------------


@dataclass(frozen=True)
class LoadPlan:
    """Everything the child process needs: plain data, so it pickles."""

    url: str
    tokens: dict[str, str]
    project_space_id: str
    clients: int
    seconds: float
    phase: str
    seed: int


@dataclass
class Retrieval:
    request_id: str
    answered: float


@dataclass
class ClientState:
    """One client's own retrievals (the ids it may read and link)."""

    retrievals: list[Retrieval] = field(default_factory=list)

    def readable(self, now: float) -> list[Retrieval]:
        return [r for r in self.retrievals if now - r.answered >= ATTRIBUTION_READ_AGE]


# (phase, endpoint, status, error code / link outcome / search mode, seconds, started: epoch s)
Sample = tuple[str, str, int, str, float, float]


def run_clients(plan: LoadPlan, events: Any) -> None:
    """Child process entry: run the clients, stream retrieval answers, then the samples."""
    samples = asyncio.run(_run_clients(plan, events))
    events.put(("samples", samples))


async def _run_clients(plan: LoadPlan, events: Any) -> list[Sample]:
    limits = httpx.Limits(max_connections=plan.clients, max_keepalive_connections=plan.clients)
    deadline = time.monotonic() + plan.seconds
    samples: list[Sample] = []
    async with httpx.AsyncClient(
        base_url=plan.url, timeout=CLIENT_TIMEOUT_SECONDS, limits=limits
    ) as http:
        ticker = asyncio.create_task(_tick(events, samples, plan.phase))
        await asyncio.gather(
            *(
                _client(http, plan, index, deadline, samples, events)
                for index in range(plan.clients)
            )
        )
        ticker.cancel()
    return samples


async def _tick(events: Any, samples: list[Sample], phase: str) -> None:
    while True:
        await asyncio.sleep(PROGRESS_SECONDS)
        errors = sum(1 for s in samples if not 200 <= s[2] < 300)
        events.put(("tick", phase, len(samples), errors))


async def _client(
    http: httpx.AsyncClient,
    plan: LoadPlan,
    index: int,
    deadline: float,
    samples: list[Sample],
    events: Any,
) -> None:
    rng = random.Random(plan.seed * 1000 + index)
    user = USERS[index % len(USERS)]
    headers = {
        "Authorization": f"Bearer {plan.tokens[user]}",
        "X-Keystone-Client": f"load-bench/{index}",
    }
    state = ClientState()
    while time.monotonic() < deadline:
        endpoint = rng.choices(ENDPOINTS, weights=[MIX[e] for e in ENDPOINTS])[0]
        now = time.monotonic()
        if endpoint == "attribution" and not state.readable(now):
            endpoint = "retrieve"
        if endpoint == "gateway" and not state.retrievals:
            endpoint = "retrieve"
        request = _request(endpoint, rng, plan, state, now)
        started_at = time.time()
        started = time.perf_counter()
        try:
            response = await _send(http, request, headers)
        except httpx.HTTPError as exc:
            failed = (plan.phase, endpoint, 0, type(exc).__name__, _since(started), started_at)
            samples.append(failed)
            continue
        seconds = _since(started)
        detail = _detail(endpoint, response)
        samples.append((plan.phase, endpoint, response.status_code, detail, seconds, started_at))
        if endpoint == "retrieve" and response.status_code == 200:
            answer = response.json()
            state.retrievals.append(Retrieval(answer["requestId"], time.monotonic()))
            del state.retrievals[:-50]
            events.put(("retrieval", answer["attributionId"], time.time()))


def _request(
    endpoint: str, rng: random.Random, plan: LoadPlan, state: ClientState, now: float
) -> tuple[str, str, dict[str, str], Any]:
    """(method, path, extra headers, json body) of one request of ``endpoint``."""
    query = rng.choice(QUERIES)
    if endpoint == "retrieve":
        body = {"query": query, "spaceId": plan.project_space_id, "tokenBudget": 4096}
        return "POST", "/api/v1/context/retrieve", {}, body
    if endpoint == "relevant":
        path = f"/api/context/{MEMORY_PROJECT}/relevant?{urlencode({'query': query, 'limit': 10})}"
        return "GET", path, {}, None
    if endpoint == "attribution":
        request_id = rng.choice(state.readable(now)).request_id
        return "GET", f"/api/v1/context/attributions/{request_id}", {}, None
    body = {"model": CHAT_MODEL, "messages": [{"role": "user", "content": query}]}
    linked = {"X-Keystone-Context-Request-Id": state.retrievals[-1].request_id}
    return "POST", "/api/v1/models/chat/completions", linked, body


async def _send(
    http: httpx.AsyncClient, request: tuple[str, str, dict[str, str], Any], headers: dict[str, str]
) -> httpx.Response:
    method, path, extra, body = request
    return await http.request(method, path, headers={**headers, **extra}, json=body)


def _since(started: float) -> float:
    return time.perf_counter() - started


def _detail(endpoint: str, response: httpx.Response) -> str:
    """The error code of an error answer; the link outcome of a gateway answer; the search mode
    of a retrieval (``hybrid``, or ``full_text`` when the embeddings endpoint failed)."""
    if response.status_code >= 400:
        try:
            return str(response.json()["error"]["code"])
        except (ValueError, KeyError, TypeError):
            return ""
    if endpoint == "gateway":
        return response.headers.get("X-Keystone-Context-Link", "")
    if endpoint == "retrieve":
        return str(response.json().get("searchMode", ""))
    return ""


# --- the runtime and its data (this process) --------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    org_id: uuid.UUID
    tokens: dict[str, str]
    project_space_id: str
    chunks: int
    memories: int


def seed(runtime: Any, keys: Any, *, memories: int) -> Seeded:
    """The organisation, its spaces and grants, three indexed sources and the memories."""
    from context_ledger.auth.local_keys import issue_token
    from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
    from context_ledger.db import connection
    from context_ledger.settings import get_settings
    from context_ledger.spaces.service import create_organisation

    with connection() as conn:
        org = create_organisation(conn, name="Load bench")
    settings = get_settings()

    def token(user: str, *scopes: str) -> str:
        return issue_token(
            keys,
            issuer=settings.auth_issuer,
            audience=settings.auth_audience,
            org_id=org.id,
            user_id=user,
            client_id="load-bench",
            scopes=frozenset(scopes),
        )

    admin = token("root", SCOPE_CONTEXT_ADMIN)
    with httpx.Client(
        base_url=runtime.url, headers={"Authorization": f"Bearer {admin}"}, timeout=300
    ) as api:

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            response = api.post(path, json=body)
            if response.status_code not in (200, 201):
                raise RuntimeError(f"POST {path}: {response.status_code} {response.text}")
            return response.json()

        spaces = "/api/v1/context/spaces"
        department = post(spaces, {"name": "Engineering", "level": "department"})["id"]
        team = post(spaces, {"name": "Platform", "level": "team", "parentId": department})["id"]
        project = post(spaces, {"name": "context-ledger", "level": "project", "parentId": team})
        for user in USERS:
            grant = {"subject": f"user:{user}", "permissions": ["context:space:search"]}
            response = api.put(f"{spaces}/{org.space_id}/grants", json=grant)
            response.raise_for_status()
        folders = [("codebase", REPO, project["id"]), ("docs", REPO / "docs", team)]
        if DESIGN_DOCS.is_dir():
            folders.append(("docs", DESIGN_DOCS, department))
        chunks = 0
        for kind, folder, space_id in folders:
            source = post(f"{spaces}/{space_id}/sources", {"kind": kind, "name": folder.name})
            chunks += ingest_folder(runtime.url, admin, source["id"], folder)
        stored = seed_memories(api, memory_texts(memories))
    return Seeded(
        org_id=org.id,
        tokens={user: token(user) for user in USERS},
        project_space_id=project["id"],
        chunks=chunks,
        memories=stored,
    )


def ingest_folder(url: str, token: str, source_id: str, folder: Path) -> int:
    from tqdm import tqdm

    from context_ledger.sources.upload import upload_folder

    with tqdm(unit="B", unit_scale=True, desc=f"ingest {folder.name}", leave=False) as bar:
        report = upload_folder(
            folder, source_id=uuid.UUID(source_id), url=url, token=token, progress=bar.update
        )
    print(f"  {folder}: {report.files} files, {report.chunks} chunks, {report.seconds:.1f} s")
    return report.chunks


def memory_texts(count: int) -> list[str]:
    """Paragraphs of this repository's and the design's Markdown, as memory contents."""
    folders = [REPO, REPO / "docs", DESIGN_DOCS]
    paragraphs: list[str] = []
    for folder in folders:
        for path in sorted(folder.glob("*.md")):
            for paragraph in path.read_text(encoding="utf-8").split("\n\n"):
                text = paragraph.strip()
                if 60 <= len(text) <= 2000 and not text.startswith(("```", "|")):
                    paragraphs.append(text)
    if not paragraphs:
        raise RuntimeError("no Markdown paragraphs to make memories of")
    return [paragraphs[i % len(paragraphs)] for i in range(count)]


def seed_memories(api: httpx.Client, texts: Sequence[str]) -> int:
    """Store the memories; the first write creates the project, the rest go four at a time."""
    from tqdm import tqdm

    path = f"/api/context/{MEMORY_PROJECT}"
    types = ("fact", "decision", "constraint", "note")

    def store(index: int) -> None:
        body = {"content": texts[index], "type": types[index % len(types)], "agent_key": "bench"}
        response = api.post(path, json=body)
        if response.status_code != 201:
            raise RuntimeError(f"POST {path}: {response.status_code} {response.text}")

    with tqdm(total=len(texts), desc="memories", leave=False) as bar:
        store(0)
        bar.update(1)
        with ThreadPoolExecutor(4) as pool:
            for _ in pool.map(store, range(1, len(texts))):
                bar.update(1)
    return len(texts)


# --- more attribution writers (child processes) ------------------------------------------------


@dataclass(frozen=True)
class WriterPlan:
    """What a writer process needs to poll the runtime's attribution queue (it inherits the
    runtime's environment: database, evidence key, checkpoint folder, SQS endpoint)."""

    queue_url: str
    region: str
    sqs_endpoint: str
    log_dir: str


def run_writer(plan: WriterPlan, index: int, stop: Any, busy: Any, counts: Any) -> None:
    """Child process entry: Lambda's event source mapping for the attribution writer, as the
    runtime's own poller does it, in a process of its own (as a concurrent Lambda would be).
    ``busy`` (a shared int) holds the size of the batch being processed, 0 between batches;
    ``counts`` (two shared ints) the messages received and redelivered so far."""
    import logging

    import boto3
    from bench_support import ServiceLog

    from context_ledger.local.invoker import Invoker
    from context_ledger.local.queues import LocalQueue, QueuePoller
    from context_ledger.local.template import read_template

    # Quiet: a fault run (bench/faults.py) would print a line (or a traceback) per failed poll,
    # connect and batch; its figures say what failed.
    for name in ("context_ledger.local.queues", "psycopg.pool"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    template = read_template(TEMPLATE)
    function = template.function(WRITER_FUNCTION)
    sqs = boto3.session.Session().client(
        "sqs", endpoint_url=plan.sqs_endpoint, region_name=plan.region
    )
    arn = sqs.get_queue_attributes(QueueUrl=plan.queue_url, AttributeNames=["QueueArn"])
    queue = LocalQueue(
        ATTRIBUTION_QUEUE,
        plan.queue_url.rsplit("/", 1)[1],
        plan.queue_url,
        arn["Attributes"]["QueueArn"],
    )
    invoker = Invoker({function.logical_id: function}, region=plan.region)
    invoker.handler(function)  # imported now, so that its logger exists to be captured
    ServiceLog(Path(plan.log_dir)).capture(f"writer-{index}")

    def invoke(name: str, event: Any) -> Any:
        busy.value = len(event["Records"])
        try:
            return invoker.invoke(name, event)
        finally:
            busy.value = 0
            counts[0] = sum(poller.counts.received for poller in pollers)
            counts[1] = sum(poller.counts.redelivered for poller in pollers)

    pollers = [
        QueuePoller(
            sqs,
            function=function,
            source=source,
            queue=queue,
            invoke=invoke,
            region=plan.region,
        )
        for source in function.sqs_sources
    ]
    for poller in pollers:
        poller.start()
    stop.wait()
    for poller in pollers:
        poller.request_stop()
    for poller in pollers:
        poller.join()


class WriterGroup:
    """Writer processes on the runtime's attribution queue; ``busy[i]`` is the size of the batch
    writer ``i`` is processing (0: none), so that a fault can strike one mid-batch.

    Each writer has a stop event of its own: setting an event waits for every process waiting
    on it to wake, and a writer killed with SIGKILL never does."""

    def __init__(self, runtime: Any, log_dir: Path) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._stops: list[Any] = []
        self._plan = WriterPlan(
            queue_url=runtime.queue_url(ATTRIBUTION_QUEUE),
            region=runtime.region,
            sqs_endpoint=runtime.sqs_endpoint,
            log_dir=str(log_dir),
        )
        self.processes: list[Any] = []
        self.busy: list[Any] = []
        self._counts: list[Any] = []

    def add(self) -> int:
        """Start one more writer; returns its index."""
        busy = self._context.Value("i", 0, lock=False)  # one writer; a lock could die with it
        counts = self._context.Array("q", 2, lock=False)
        stop = self._context.Event()
        index = len(self.processes)
        writer = self._context.Process(
            target=run_writer, args=(self._plan, index, stop, busy, counts), name=f"writer-{index}"
        )
        writer.start()
        self.processes.append(writer)
        self.busy.append(busy)
        self._counts.append(counts)
        self._stops.append(stop)
        return index

    def delivery_counts(self) -> tuple[int, int]:
        """Messages the writers received, and how many of those were redeliveries (a killed
        writer's counts stay, up to its last finished batch)."""
        return sum(c[0] for c in self._counts), sum(c[1] for c in self._counts)

    def stop(self) -> None:
        for writer, stop in zip(self.processes, self._stops, strict=True):
            if writer.is_alive():
                stop.set()
        for writer in self.processes:
            writer.join()


@contextmanager
def writer_processes(runtime: Any, count: int, log_dir: Path) -> Iterator[WriterGroup]:
    """``count`` more writers on the attribution queue while in the block."""
    group = WriterGroup(runtime, log_dir)
    for _ in range(count):
        group.add()
    try:
        yield group
    finally:
        group.stop()


def delivery_line(runtime: Any, writers: WriterGroup, dlq: QueueWatch) -> str:
    """The attribution queue's delivery record: dead-letter depth and redeliveries, over the
    runtime's own poller and the writer processes (read before the runtime stops)."""
    own = runtime.delivery_counts(ATTRIBUTION_QUEUE)
    received, redelivered = writers.delivery_counts()
    visible, in_flight = dlq.counts()
    redelivered += own.redelivered
    return (
        f"dead-letter queue depth {visible + in_flight}; redeliveries {redelivered} of "
        f"{own.received + received} messages received (runtime poller and "
        f"{len(writers.processes)} writer processes)"
    )


# --- what is watched during the load ----------------------------------------------------------


class QueueWatch:
    """The attribution queue sampled every second: backlog (SQS attributes) and the age of its
    oldest message (moto's in-process store; see the module docstring)."""

    def __init__(self, runtime: Any, logical_id: str) -> None:
        import boto3

        self.url = runtime.queue_url(logical_id)
        self.name = self.url.rsplit("/", 1)[1]
        self.region = runtime.region
        self._sqs = boto3.session.Session().client(
            "sqs", endpoint_url=runtime.sqs_endpoint, region_name=self.region
        )
        self.phase = "seed"
        self.samples: list[tuple[str, int, int, float]] = []  # phase, visible, in flight, age s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queue-watch", daemon=True)

    def counts(self) -> tuple[int, int]:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return (
            int(attributes["ApproximateNumberOfMessages"]),
            int(attributes["ApproximateNumberOfMessagesNotVisible"]),
        )

    def oldest_age(self) -> float:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.sqs.models import sqs_backends

        stored = sqs_backends[DEFAULT_ACCOUNT_ID][self.region].queues[self.name]
        sent = [m.sent_timestamp for m in list(stored._messages) if m.sent_timestamp]
        return (time.time() * 1000 - min(sent)) / 1000 if sent else 0.0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        while not self._stop.wait(1.0):
            try:
                visible, in_flight = self.counts()
            except (BotoCoreError, ClientError):
                continue  # the SQS endpoint is down (bench/faults.py): no sample this second
            self.samples.append((self.phase, visible, in_flight, self.oldest_age()))

    def latest(self) -> tuple[int, int, float]:
        return self.samples[-1][1:] if self.samples else (0, 0, 0.0)


class EvidenceLag:
    """Time from a retrieval's answer (the client's clock) to its attribution row being visible
    (polled by attribution id every LAG_POLL_SECONDS, one query for all pending ids)."""

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[str, float]] = {}
        self.lags: list[tuple[str, float]] = []  # phase, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="evidence-lag", daemon=True)

    def add(self, phase: str, attribution_id: str, answered_at: float) -> None:
        with self._lock:
            self._pending[attribution_id] = (phase, answered_at)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._url, autocommit=True) as conn:
                    self._poll(conn)
            except psycopg.OperationalError:
                self._stop.wait(LAG_POLL_SECONDS)  # the database restarts (bench/faults.py)

    def _poll(self, conn: psycopg.Connection) -> None:
        while not self._stop.wait(LAG_POLL_SECONDS):
            with self._lock:
                ids = list(self._pending)
            if not ids:
                continue
            rows = conn.execute(
                "SELECT attribution_id::text FROM attributions"
                " WHERE attribution_id = ANY(%s::uuid[])",
                (ids,),
            ).fetchall()
            seen = time.time()
            with self._lock:
                for (attribution_id,) in rows:
                    phase, answered_at = self._pending.pop(attribution_id)
                    self.lags.append((phase, seen - answered_at))


# --- one phase ----------------------------------------------------------------------------------


@dataclass
class PhaseResult:
    phase: str
    clients: int
    seconds: float
    samples: list[Sample]
    attribution_ids: list[str]


def run_phase(
    plan: LoadPlan,
    watch: QueueWatch,
    lag: EvidenceLag,
    started: float,
    lag_every: int = LAG_SAMPLE_EVERY,
) -> PhaseResult:
    """Run ``plan`` in a child process; feed the lag probe (every ``lag_every``-th retrieval)
    and print progress while it runs."""
    context = multiprocessing.get_context("spawn")
    events = context.Queue()
    child = context.Process(target=run_clients, args=(plan, events), name=f"clients-{plan.phase}")
    watch.phase = plan.phase
    print(
        f"[{time.perf_counter() - started:6.0f} s] {plan.phase}: {plan.clients} client(s), "
        f"{plan.seconds:.0f} s",
        flush=True,
    )
    began = time.perf_counter()
    child.start()
    attribution_ids: list[str] = []
    samples: list[Sample] | None = None
    while samples is None:
        try:
            event = events.get(timeout=1.0)
        except queue.Empty:
            if not child.is_alive():
                raise RuntimeError(f"the client process died (exit {child.exitcode})") from None
            continue
        if event[0] == "retrieval":
            _, attribution_id, answered_at = event
            if len(attribution_ids) % lag_every == 0:
                lag.add(watch.phase, attribution_id, answered_at)  # the phase or a fault window
            attribution_ids.append(attribution_id)
        elif event[0] == "tick":
            _, phase, requests, errors = event
            visible, in_flight, age = watch.latest()
            elapsed = time.perf_counter() - began
            print(
                f"[{time.perf_counter() - started:6.0f} s] {phase}: {requests} requests "
                f"({requests / elapsed:.1f}/s), {errors} errors, {len(attribution_ids)} "
                f"retrievals; queue {visible} waiting + {in_flight} in flight, oldest "
                f"{age:.1f} s",
                flush=True,
            )
        else:
            samples = event[1]
    child.join()
    return PhaseResult(plan.phase, plan.clients, plan.seconds, samples, attribution_ids)


# --- afterwards ---------------------------------------------------------------------------------


def drain(watch: QueueWatch, lag: EvidenceLag, timeout: float) -> bool:
    """Wait until the attribution queue is empty and every sampled record has landed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if watch.counts() == (0, 0) and lag.pending == 0:
            return True
        time.sleep(0.5)
    return False


@dataclass(frozen=True)
class Reconciliation:
    answered: int
    records: int
    dead_letters: int
    missing: int

    @property
    def ok(self) -> bool:
        return self.answered == self.records + self.dead_letters and (
            self.missing == self.dead_letters
        )


def reconcile(org_id: uuid.UUID, attribution_ids: Sequence[str], dlq: QueueWatch) -> Reconciliation:
    from context_ledger.db import connection

    with connection() as conn:
        recorded = {
            str(row["attribution_id"])
            for row in conn.execute(
                "SELECT attribution_id FROM attributions WHERE org_id = %s", (org_id,)
            ).fetchall()
        }
    visible, in_flight = dlq.counts()
    return Reconciliation(
        answered=len(attribution_ids),
        records=len(recorded),
        dead_letters=visible + in_flight,
        missing=len(set(attribution_ids) - recorded),
    )


def verify_chains() -> list[tuple[str, bool, int, str | None]]:
    """Every chain verified from seq 1, lookup rows included: (chain, ok, entries checked,
    reason)."""
    from context_ledger.attribution.index_check import check_lookup_rows
    from context_ledger.db import connection
    from context_ledger.evidence.keys import get_key_ring
    from context_ledger.evidence.verify_job import list_chains, verify_chain

    keys = get_key_ring()
    with connection() as conn:
        chains = list_chains(conn)
    results = []
    for chain in chains:
        with connection() as conn:
            verified = verify_chain(
                conn, chain=chain, keys=keys, full=True, index_check=check_lookup_rows
            )
        results.append((chain, verified.ok, verified.result.checked, verified.reason))
    return results


# --- the report ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(samples: Sequence[Sample]) -> str:
    ms = [s[4] * 1000 for s in samples if 200 <= s[2] < 300]
    if not ms:
        return f"{'-':>8} {'-':>8} {'-':>8}"
    return " ".join(f"{percentile(ms, q):>8.1f}" for q in (0.5, 0.95, 0.99))


def print_report(phases: Sequence[PhaseResult], watch: QueueWatch, lag: EvidenceLag) -> None:
    load = phases[-1]
    print(
        "\n" + "; ".join(f"{p.phase}: {p.clients} client(s) for {p.seconds:.0f} s" for p in phases)
    )
    print(
        f"\n{'endpoint':<12} {'baseline: n':>11} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}"
        f" | {'load: n':>8} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'errors':>7}"
    )
    for endpoint in (*ENDPOINTS, "all"):
        rows = []
        for phase in phases:
            rows.append([s for s in phase.samples if endpoint in ("all", s[1])])
        base, under_load = rows
        errors = sum(1 for s in under_load if not 200 <= s[2] < 300)
        rate = errors / len(under_load) * 100 if under_load else 0.0
        print(
            f"{endpoint:<12} {len(base):>11} {latency(base)} | {len(under_load):>8} "
            f"{len(under_load) / load.seconds:>7.1f} {latency(under_load)} {rate:>6.2f}%"
        )
    print("(latency of 2xx answers; baseline: 1 client, same run, same data)")

    for phase in phases:
        statuses = Counter(
            (s[1], s[2], s[3] if s[2] >= 300 or s[2] == 0 else "") for s in phase.samples
        )
        print(f"\nanswers by status, {phase.phase}:")
        for (endpoint, status, detail), count in sorted(statuses.items()):
            share = count / len(phase.samples) * 100
            label = f" {detail}" if detail else ""
            print(f"  {endpoint:<12} {status:>3}{label:<32} {count:>7} {share:>6.2f}%")
        links = Counter(s[3] for s in phase.samples if s[1] == "gateway" and s[2] == 200)
        print(f"  gateway link outcomes: {dict(sorted(links.items()))}")

    by_phase: dict[str, list[float]] = defaultdict(list)
    for phase_name, seconds in lag.lags:
        by_phase[phase_name].append(seconds * 1000)
    print(
        "\nretrieval answered -> evidence record visible (ms, every "
        f"{LAG_SAMPLE_EVERY}rd retrieval, polled every {LAG_POLL_SECONDS * 1000:.0f} ms):"
    )
    for phase in phases:
        values = by_phase.get(phase.phase, [])
        if values:
            print(
                f"  {phase.phase:<9} n={len(values):<6} p50 {percentile(values, 0.5):8.0f}"
                f"  p95 {percentile(values, 0.95):8.0f}  p99 {percentile(values, 0.99):8.0f}"
                f"  max {max(values):8.0f}"
            )
    print(f"  not landed: {lag.pending}")

    print("\nattribution queue, sampled every second (age of the oldest message, in flight incl.):")
    for phase in phases:
        rows = [s for s in watch.samples if s[0] == phase.phase]
        if rows:
            ages = [s[3] for s in rows]
            backlog = [s[1] + s[2] for s in rows]
            print(
                f"  {phase.phase:<9} n={len(rows):<4} age p50 {statistics.median(ages):6.1f} s"
                f"  p95 {percentile(ages, 0.95):6.1f} s  max {max(ages):6.1f} s;"
                f"  messages p50 {statistics.median(backlog):6.0f}  max {max(backlog):6.0f}"
            )


# --- main ----------------------------------------------------------------------------------------


def seed_and_watch(
    runtime: Any, keys: Any, database_url: str, *, memories: int, started: float
) -> tuple[Seeded, QueueWatch, QueueWatch, EvidenceLag]:
    """Seed the organisation, then start watching the attribution queue and the evidence lag;
    also returns the dead-letter queue's watch (read at the end, not sampled)."""
    seeded = seed(runtime, keys, memories=memories)
    print(
        f"[{time.perf_counter() - started:6.0f} s] seeded {seeded.chunks} chunks, "
        f"{seeded.memories} memories",
        flush=True,
    )
    watch = QueueWatch(runtime, ATTRIBUTION_QUEUE)
    dlq = QueueWatch(runtime, "AttributionDLQ")
    lag = EvidenceLag(database_url)
    watch.start()
    lag.start()
    return seeded, watch, dlq, lag


@contextmanager
def stand_ins() -> Iterator[tuple[str, str]]:
    """The hashing embeddings server and the echo model provider: (embeddings URL, provider URL)."""
    from context_ledger.local.embeddings_server import serve_embeddings
    from context_ledger.local.provider_server import serve_provider

    with (
        serve_embeddings(dims=EMBEDDINGS_DIMENSIONS) as embeddings,
        serve_provider() as provider,
    ):
        yield embeddings.url, provider.url


def runtime_env(
    home: Path, keys: Any, database_url: str, embeddings_url: str, provider_url: str, pool_max: int
) -> dict[str, str]:
    """The local runtime's environment: the scratch database, the stand-ins, a pool of
    ``pool_max`` connections, and no memory rate limit."""
    return {
        "KEYSTONE_ENVIRONMENT": "local",
        "CONTEXT_LEDGER_HOME": str(home),
        "DATABASE_URL": database_url,
        "KEYSTONE_AUTH_JWKS_URL": keys.jwks_url,
        "KEYSTONE_EVIDENCE_HMAC_KEY": secrets.token_hex(32),
        "KEYSTONE_CONTEXT_EMBEDDINGS_URL": embeddings_url,
        "KEYSTONE_CONTEXT_EMBEDDINGS_MODEL": f"hashing-{EMBEDDINGS_DIMENSIONS}",
        "KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS": str(EMBEDDINGS_DIMENSIONS),
        "KEYSTONE_MODELS_PROVIDER_URL": provider_url,
        # 32 clients as 4 users would be throttled at the default 600 a minute per caller.
        "VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE": "1000000",
        "KEYSTONE_DB_POOL_MAX": str(pool_max),
    }


def run(args: argparse.Namespace, database_url: str) -> bool:
    from bench_support import ServiceLog, scratch_dir

    from context_ledger.auth.local_keys import ensure_local_keys
    from context_ledger.local.runtime import LocalRuntime

    started = time.perf_counter()
    home = scratch_dir("ctxl-load-home-")
    keys = ensure_local_keys(home)
    service_log = ServiceLog(scratch_dir("ctxl-load-logs-"))
    with stand_ins() as (embeddings_url, provider_url):
        env = runtime_env(
            home, keys, database_url, embeddings_url, provider_url, pool_max=args.pool_max
        )
        with LocalRuntime(TEMPLATE, port=0, env=env) as runtime:
            service_log.capture("runtime")
            print(
                f"[{time.perf_counter() - started:6.0f} s] runtime on {runtime.url} (database "
                f"pool {args.pool_max} connections, {args.writers} more writer processes); "
                "seeding"
            )
            seeded, watch, dlq, lag = seed_and_watch(
                runtime, keys, database_url, memories=args.memories, started=started
            )
            phases = []
            with writer_processes(runtime, args.writers, service_log.directory) as writers:
                for phase, clients, seconds in [
                    ("baseline", 1, args.baseline_seconds),
                    ("load", args.clients, args.seconds),
                ]:
                    plan = LoadPlan(
                        url=runtime.url,
                        tokens=seeded.tokens,
                        project_space_id=seeded.project_space_id,
                        clients=clients,
                        seconds=seconds,
                        phase=phase,
                        seed=args.seed,
                    )
                    phases.append(run_phase(plan, watch, lag, started))
                watch.phase = "drain"
                print(f"[{time.perf_counter() - started:6.0f} s] waiting for the queue to drain")
                drained = drain(watch, lag, args.drain_timeout)
                deliveries = delivery_line(runtime, writers, dlq)
            watch.stop()
            lag.stop()
            attribution_ids = [a for phase in phases for a in phase.attribution_ids]
            counts = reconcile(seeded.org_id, attribution_ids, dlq)
            print(f"[{time.perf_counter() - started:6.0f} s] verifying the chains")
            chains = verify_chains()
    load_average = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print_report(phases, watch, lag)
    print(
        f"\nmachine: {os.cpu_count()} cores shared with other work; load average now "
        f"{load_average} (runtime, clients, PostgreSQL and moto all on it)"
    )
    print(f"\nqueue drained: {'yes' if drained else f'NO within {args.drain_timeout:.0f} s'}")
    print(
        f"reconciliation: retrievals answered 200 = {counts.answered}; attribution records "
        f"{counts.records} + dead-letter messages {counts.dead_letters} = "
        f"{counts.records + counts.dead_letters}; ids answered without a record {counts.missing}"
        f" -> {'OK' if counts.ok else 'FAILED'}"
    )
    print(deliveries)
    for chain, ok, checked, reason in chains:
        print(f"chain {chain}: {'ok' if ok else f'FAILED ({reason})'}, {checked} entries checked")
    chains_ok = bool(chains) and all(ok for _, ok, _, _ in chains)
    print(service_log.summary())
    internal_errors = sum(1 for phase in phases for s in phase.samples if s[2] == 500)
    print(f"internal errors (500): {internal_errors}")
    print(f"total {time.perf_counter() - started:.0f} s")
    return counts.ok and chains_ok and drained and internal_errors == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=60.0, help="load duration")
    parser.add_argument(
        "--baseline-seconds", type=float, default=10.0, help="single-client baseline duration"
    )
    parser.add_argument("--memories", type=int, default=300, help="memories in the project")
    parser.add_argument(
        "--drain-timeout", type=float, default=120.0, help="seconds to wait for the queue"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the clients' choices")
    parser.add_argument(
        "--writers",
        type=int,
        default=2,
        help="attribution writer processes besides the runtime's own poller (0: none)",
    )
    parser.add_argument(
        "--pool-max",
        type=int,
        help="the runtime's KEYSTONE_DB_POOL_MAX (default: clients + 8, at most 100)",
    )
    args = parser.parse_args(argv)
    if args.pool_max is None:
        args.pool_max = min(100, args.clients + 8)
    if args.writers < 0:
        parser.error("--writers must not be negative")
    if args.clients < 1 or args.seconds <= 0 or args.baseline_seconds <= 0 or args.memories < 1:
        parser.error("--clients, --seconds, --baseline-seconds and --memories must be positive")
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    from bench_support import template_log_level  # bench/ is the script's folder, on sys.path

    os.environ["POWERTOOLS_LOG_LEVEL"] = template_log_level()
    from ingest import scratch_database

    with scratch_database() as url:
        ok = run(args, url)
    if not ok:
        print(
            "FAILED: see the internal errors, reconciliation, drain and chain lines above",
            file=sys.stderr,
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
