"""Faults under load: each injected several times while clients run, each reported.

The setting is ``bench/load.py``'s (its docstring explains it): the local runtime serving
``template.yaml`` in this process over a scratch database, the hashing embeddings and echo model
stand-ins, more attribution writers in processes of their own, and the clients (the load mix) in a
child process. Here the PostgreSQL server (embedded, started by this script so it can stop it) and
the SQS endpoint (moto's app on a fixed loopback port, its queues in moto's in-process store) are
this script's too, so that they can be taken away and brought back.

While the clients run, each fault is injected ``--repetitions`` times, for ``--outage-seconds``
each, with ``--before-seconds`` of normal load before and ``--after-seconds`` after:

- ``postgres``: the server stopped (fast shutdown: every session is ended, as in a restart or a
  failover) and started again on the same socket; nothing else is restarted;
- ``sqs``: the SQS endpoint stopped (connections refused), then served again;
- ``writer``: one writer process killed with SIGKILL while it processes a batch (``busy`` > 0),
  a new one started after the outage; the batch comes back after the queue's visibility timeout;
- ``embeddings-slow``, ``embeddings-503``, ``embeddings-refused``: the embeddings stand-in
  answering ``SLOW_SECONDS`` late, answering 503 to everything, or not listening.

Reported per fault, over its repetitions: the answers by endpoint and status (error code, or a
retrieval's search mode) for requests started before / during / after the outage; the longest
request in flight during an outage next to the timeout that should bound it; the time to recover
(the first good answer after the fault was lifted: any 200 for ``postgres``, a retrieval's 200 for
``sqs``, ``/relevant``'s 200 and the first hybrid retrieval for the embeddings faults) and, for the
``writer``, the longest wait of a sampled retrieval for its evidence record. Then, once the queue
has drained: every chain verifies, retrievals answered ``200`` = attribution records + dead
letters, **records lost** (answered ids without a record and not in the dead-letter queue), and
duplicates (attribution entries in the chain beyond one per attribution id).

Before the load it also measures what the pool's check on checkout (``db/pool.py``) costs: a
checkout with and without it on the same database.

    .venv/bin/python bench/faults.py            # 12 clients, every fault 3 times (about 8 min)
    .venv/bin/python bench/faults.py --quick    # 8 clients, once each (about 4 min)

Always on an embedded PostgreSQL of its own (it has to stop and start it).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from load import (  # bench/ is the script's folder, first on sys.path
    ATTRIBUTION_QUEUE,
    EMBEDDINGS_DIMENSIONS,
    TEMPLATE,
    LoadPlan,
    QueueWatch,
    Reconciliation,
    Sample,
    WriterGroup,
    delivery_line,
    drain,
    percentile,
    reconcile,
    run_phase,
    runtime_env,
    seed_and_watch,
    verify_chains,
    writer_processes,
)

FAULTS = (
    "writer",
    "postgres",
    "sqs",
    "embeddings-slow",
    "embeddings-503",
    "embeddings-refused",
)
#: How late the slow embeddings stand-in answers: past the query timeout (3 s by default).
SLOW_SECONDS = 6.0
#: Normal load before the first fault.
WARMUP_SECONDS = 10.0
#: How long to wait for a writer to be in the middle of a batch before killing one anyway.
BUSY_WAIT_SECONDS = 10.0
CHECK_COST_CHECKOUTS = 2000
CHECK_COST_ROUNDS = 20


# --- what is taken away and brought back --------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SqsEndpoint:
    """moto's app on a fixed loopback port. Stopping it closes the socket (connections are
    refused); the queues and messages live in moto's in-process store and are there again when
    it is served again."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from moto.moto_server.werkzeug_app import (
            DomainDispatcherApplication,
            MotoRequestHandler,
            create_backend_app,
        )
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server(
            "127.0.0.1", self.port, app, threaded=True, request_handler=MotoRequestHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="sqs", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join()


class EmbeddingsStandIn:
    """The hashing embeddings stand-in, slowed, failing or stopped (and restarted on the same
    port) through the opt-in hooks of ``local/embeddings_server.py``."""

    def __init__(self, stack: ExitStack, dims: int) -> None:
        from context_ledger.local.embeddings_server import serve_embeddings

        self._stack = stack
        self._dims = dims
        self._serve = serve_embeddings
        self.server = stack.enter_context(serve_embeddings(dims=dims))
        self.port = self.server.server_address[1]

    def slow(self, seconds: float) -> None:
        self.server.delay = seconds

    def fail(self, status: int) -> None:
        self.server.fail_next(status, times=1_000_000)

    def refuse(self) -> None:
        self.server.go_down()

    def restore(self) -> None:
        if self.server.down:  # serve again on the same port
            self.server = self._stack.enter_context(self._serve(self.port, self._dims))
        self.server.reset()


# --- the faults -----------------------------------------------------------------------------------


@dataclass
class Outage:
    """One injection: when it started and ended (epoch seconds) and what was done."""

    fault: str
    repetition: int
    injected: float = 0.0
    lifted: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.fault}#{self.repetition}"


@dataclass(frozen=True)
class Fault:
    name: str
    inject: Callable[[Outage], None]
    lift: Callable[[Outage], None]
    #: the timeout that should bound a request during the outage, and what it is
    bound_seconds: float
    bound: str


def faults(
    server: Any,
    sqs: SqsEndpoint,
    embeddings: EmbeddingsStandIn,
    writers: WriterGroup,
    settings: Any,
) -> dict[str, Fault]:
    from context_ledger.attribution import publisher
    from context_ledger.local.postgres import start_embedded_again, stop_embedded

    killed: dict[str, int] = {}

    def kill_writer(outage: Outage) -> None:
        deadline = time.monotonic() + BUSY_WAIT_SECONDS
        while time.monotonic() < deadline:
            busy = [
                (i, b.value)
                for i, b in enumerate(writers.busy)
                if i not in killed.values() and writers.processes[i].is_alive()
            ]
            mid_batch = [(i, size) for i, size in busy if size > 0]
            if mid_batch:
                break
            time.sleep(0.005)
        index, size = mid_batch[0] if mid_batch else (busy[0][0], 0)
        process = writers.processes[index]
        os.kill(process.pid, signal.SIGKILL)
        killed[outage.label] = index
        outage.notes.append(f"killed writer-{index} (pid {process.pid}) mid-batch of {size}")

    def start_writer(outage: Outage) -> None:
        index = writers.add()
        outage.notes.append(f"started writer-{index}")

    publisher_bound = publisher.MAX_ATTEMPTS * (
        publisher.CONNECT_TIMEOUT_SECONDS + publisher.READ_TIMEOUT_SECONDS
    )
    query_timeout = settings.embeddings_query_timeout_seconds
    return {
        "writer": Fault("writer", kill_writer, start_writer, 0.0, "none: no client waits on it"),
        "postgres": Fault(
            "postgres",
            lambda _: stop_embedded(server),
            lambda _: start_embedded_again(server),
            settings.db_pool_timeout_seconds,
            "KEYSTONE_DB_POOL_TIMEOUT_SECONDS",
        ),
        "sqs": Fault(
            "sqs",
            lambda _: sqs.stop(),
            lambda _: sqs.start(),
            publisher_bound,
            "the publisher's attempts x (connect + read timeout)",
        ),
        "embeddings-slow": Fault(
            "embeddings-slow",
            lambda _: embeddings.slow(SLOW_SECONDS),
            lambda _: embeddings.restore(),
            query_timeout,
            "KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS",
        ),
        "embeddings-503": Fault(
            "embeddings-503",
            lambda _: embeddings.fail(503),
            lambda _: embeddings.restore(),
            query_timeout,
            "KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS",
        ),
        "embeddings-refused": Fault(
            "embeddings-refused",
            lambda _: embeddings.refuse(),
            lambda _: embeddings.restore(),
            query_timeout,
            "KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS",
        ),
    }


@dataclass(frozen=True)
class Schedule:
    before: float
    outage: float
    after: float

    @property
    def slot(self) -> float:
        return self.before + self.outage + self.after


def run_faults(
    chosen: Sequence[Fault],
    repetitions: int,
    schedule: Schedule,
    watch: QueueWatch,
    started: float,
) -> list[Outage]:
    """Inject every fault ``repetitions`` times on the schedule; label the watch's samples (and
    the evidence lag probe's) with the window they fall in."""
    outages: list[Outage] = []
    watch.phase = "warmup"
    time.sleep(WARMUP_SECONDS)
    for fault in chosen:
        for repetition in range(1, repetitions + 1):
            outage = Outage(fault.name, repetition)
            watch.phase = f"{outage.label}:before"
            time.sleep(schedule.before)
            watch.phase = f"{outage.label}:during"
            outage.injected = time.time()
            try:
                fault.inject(outage)
                time.sleep(max(0.0, outage.injected + schedule.outage - time.time()))
            finally:
                fault.lift(outage)
                outage.lifted = time.time()
            watch.phase = f"{outage.label}:after"
            notes = f" ({'; '.join(outage.notes)})" if outage.notes else ""
            print(
                f"[{time.perf_counter() - started:6.0f} s] {outage.label}: "
                f"{outage.lifted - outage.injected:.1f} s{notes}",
                flush=True,
            )
            outages.append(outage)
            time.sleep(schedule.after)
    watch.phase = "tail"
    return outages


# --- the report ---------------------------------------------------------------------------------

WINDOWS = ("before", "during", "after")


def answered_at(sample: Sample) -> float:
    return sample[5] + sample[4]


def window_of(sample: Sample, outage: Outage, schedule: Schedule) -> str | None:
    started = sample[5]
    if outage.injected - schedule.before <= started < outage.injected:
        return "before"
    if outage.injected <= started < outage.lifted:
        return "during"
    if outage.lifted <= started < outage.lifted + schedule.after:
        return "after"
    return None


def outcome(sample: Sample) -> str:
    """``200``, ``200 full_text``, ``503 service_unavailable``, ``0 ReadTimeout``, ..."""
    status, detail = sample[2], sample[3]
    if status == 200 and sample[1] == "retrieve":
        return f"200 {detail}" if detail else "200"
    if status == 200:
        return "200"
    return f"{status} {detail}".strip()


def is_good(sample: Sample) -> bool:
    return 200 <= sample[2] < 300


@dataclass
class FaultFigures:
    fault: Fault
    outages: list[Outage]
    windows: dict[str, Counter[tuple[str, str]]]
    longest: tuple[float, str, str] | None  # seconds, endpoint, outcome
    before_longest: float
    recoveries: dict[str, list[float | None]]
    evidence_wait: list[float]
    dead_letters_after: int | None = None

    @property
    def requests(self) -> dict[str, int]:
        return {w: sum(self.windows[w].values()) for w in WINDOWS}

    @property
    def errors(self) -> dict[str, int]:
        return {
            w: sum(n for (_, o), n in self.windows[w].items() if not o.startswith("200"))
            for w in WINDOWS
        }


def recovery_kinds(fault: str) -> dict[str, Callable[[Sample], bool]]:
    """What counts as recovered after this fault was lifted, by name."""
    if fault == "postgres":
        return {"any 200": is_good}
    if fault == "sqs":
        return {"retrieve 200": lambda s: s[1] == "retrieve" and is_good(s)}
    if fault.startswith("embeddings"):
        return {
            "/relevant 200": lambda s: s[1] == "relevant" and is_good(s),
            "hybrid retrieve": lambda s: s[1] == "retrieve" and is_good(s) and s[3] == "hybrid",
        }
    return {}


def figures_of(
    fault: Fault,
    outages: Sequence[Outage],
    samples: Sequence[Sample],
    lags: Sequence[tuple[str, float]],
    schedule: Schedule,
) -> FaultFigures:
    windows: dict[str, Counter[tuple[str, str]]] = {w: Counter() for w in WINDOWS}
    longest: tuple[float, str, str] | None = None
    before_longest = 0.0
    recoveries: dict[str, list[float | None]] = defaultdict(list)
    for outage in outages:
        for sample in samples:
            window = window_of(sample, outage, schedule)
            if window is not None:
                windows[window][(sample[1], outcome(sample))] += 1
            if window == "before" and answered_at(sample) < outage.injected:
                before_longest = max(before_longest, sample[4])  # untouched by the outage
            in_flight = sample[5] < outage.lifted and answered_at(sample) > outage.injected
            if in_flight and (longest is None or sample[4] > longest[0]):
                longest = (sample[4], sample[1], outcome(sample))
        for name, good in recovery_kinds(fault.name).items():
            after = [answered_at(s) for s in samples if good(s) and answered_at(s) >= outage.lifted]
            recoveries[name].append(min(after) - outage.lifted if after else None)
    labels = {f"{o.label}:{w}" for o in outages for w in ("before", "during")}
    evidence_wait = [seconds for phase, seconds in lags if phase in labels]
    return FaultFigures(
        fault, list(outages), windows, longest, before_longest, recoveries, evidence_wait
    )


def print_fault(figures: FaultFigures, schedule: Schedule) -> None:
    fault = figures.fault
    print(
        f"\n== {fault.name}: {len(figures.outages)} x {schedule.outage:.0f} s "
        f"(windows: {schedule.before:.0f} s before, the outage, {schedule.after:.0f} s after)"
    )
    for outage in figures.outages:
        if outage.notes:
            print(f"  {outage.label}: {'; '.join(outage.notes)}")
    for window in WINDOWS:
        counts = figures.windows[window]
        total = sum(counts.values())
        print(f"  {window:<7} {total:>6} requests, {figures.errors[window]:>5} not 2xx:")
        by_endpoint: dict[str, list[str]] = defaultdict(list)
        for (endpoint, result), count in sorted(counts.items()):
            by_endpoint[endpoint].append(f"{result} x{count}")
        for endpoint, results in by_endpoint.items():
            print(f"    {endpoint:<12} {', '.join(results)}")
    if figures.longest is not None:
        seconds, endpoint, result = figures.longest
        line = f"  longest request in flight during an outage: {seconds:.2f} s ({endpoint}"
        line += f", {result})"
        if fault.bound_seconds > 0:
            limit = fault.bound_seconds + figures.before_longest
            verdict = "OK" if seconds <= limit else "LONGER"
            line += (
                f"; bound {fault.bound_seconds:.1f} s ({fault.bound}) + longest answered before it "
                f"{figures.before_longest:.2f} s = {limit:.2f} s -> {verdict}"
            )
        print(line)
    for name, values in figures.recoveries.items():
        shown = ", ".join("never" if v is None else f"{v:.2f} s" for v in values)
        print(f"  time to recover ({name} answered after the fault was lifted): {shown}")
    if figures.evidence_wait:
        print(
            f"  evidence record of a retrieval answered before/during the outage, landed after: "
            f"n={len(figures.evidence_wait)}, p50 {percentile(figures.evidence_wait, 0.5):.1f} s,"
            f" max {max(figures.evidence_wait):.1f} s"
        )


@dataclass(frozen=True)
class Evidence:
    counts: Reconciliation
    entries: int
    rows: int
    extra_records: int

    @property
    def duplicates(self) -> int:
        return self.entries - self.rows

    @property
    def lost(self) -> int:
        return self.counts.missing - self.counts.dead_letters


def evidence(org_id: Any, attribution_ids: Sequence[str], dlq: QueueWatch) -> Evidence:
    from context_ledger.attribution.events import CATEGORY
    from context_ledger.db import connection

    counts = reconcile(org_id, attribution_ids, dlq)
    with connection() as conn:
        entries = conn.execute(
            "SELECT count(*) AS n FROM evidence_chain WHERE org_id = %s AND category = %s",
            (org_id, CATEGORY),
        ).fetchone()["n"]
        rows = conn.execute(
            "SELECT count(*) AS n FROM attributions WHERE org_id = %s", (org_id,)
        ).fetchone()["n"]
    extra = counts.records - (counts.answered - counts.missing)
    return Evidence(counts, entries, rows, extra)


# --- the pool's check on checkout ---------------------------------------------------------------


def check_cost(database_url: str) -> tuple[list[float], list[float]]:
    """Microseconds per checkout (``connection()`` and a trivial statement) in each round,
    without and with ``ConnectionPool.check_connection``: one connection each, same database,
    in alternating rounds so that the machine's other work weighs on both alike."""
    from psycopg_pool import ConnectionPool

    def checkouts(pool: ConnectionPool, count: int) -> float:
        began = time.perf_counter()
        for _ in range(count):
            with pool.connection() as conn:
                conn.execute("SELECT 1")
        return (time.perf_counter() - began) / count * 1e6

    rounds: tuple[list[float], list[float]] = ([], [])
    with (
        ConnectionPool(database_url, min_size=1, max_size=1, open=True) as plain,
        ConnectionPool(
            database_url,
            min_size=1,
            max_size=1,
            check=ConnectionPool.check_connection,
            open=True,
        ) as checked,
    ):
        for pool in (plain, checked):
            checkouts(pool, 100)  # warm up
        for _ in range(CHECK_COST_ROUNDS):
            for pool, times in zip((plain, checked), rounds, strict=True):
                times.append(checkouts(pool, CHECK_COST_CHECKOUTS // CHECK_COST_ROUNDS))
    return rounds


# --- main -----------------------------------------------------------------------------------------


@contextmanager
def own_postgres() -> Iterator[Any]:
    """An embedded server of this run's own; DATABASE_URL points at it for scratch_database."""
    from context_ledger.local.postgres import start_embedded

    folder = Path(tempfile.mkdtemp(prefix="ctxl-faults-"))
    server = start_embedded(folder / "pgdata")
    os.environ["DATABASE_URL"] = server.get_uri()
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def run(args: argparse.Namespace, server: Any, database_url: str) -> bool:
    import boto3
    from bench_support import ServiceLog

    from context_ledger.auth.local_keys import ensure_local_keys
    from context_ledger.local.provider_server import serve_provider
    from context_ledger.local.runtime import LocalRuntime
    from context_ledger.settings import get_settings

    started = time.perf_counter()
    without, with_check = check_cost(database_url)
    fastest = min(with_check) - min(without)
    typical = statistics.median(with_check) - statistics.median(without)
    print(
        f"pool checkout + SELECT 1, {CHECK_COST_CHECKOUTS} times each in {CHECK_COST_ROUNDS} "
        f"alternating rounds: fastest round {min(without):.0f} us without the check, "
        f"{min(with_check):.0f} us with it ({fastest:+.0f} us per checkout); median round "
        f"{statistics.median(without):.0f} / {statistics.median(with_check):.0f} us "
        f"({typical:+.0f})"
    )
    schedule = Schedule(args.before_seconds, args.outage_seconds, args.after_seconds)
    home = Path(tempfile.mkdtemp(prefix="ctxl-faults-home-"))
    keys = ensure_local_keys(home)
    service_log = ServiceLog(home / "logs")
    service_log.directory.mkdir()
    sqs = SqsEndpoint()
    sqs.start()
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, home, ignore_errors=True)
        stack.callback(sqs.stop)
        embeddings = EmbeddingsStandIn(stack, EMBEDDINGS_DIMENSIONS)
        provider = stack.enter_context(serve_provider())
        env = runtime_env(
            home, keys, database_url, embeddings.server.url, provider.url, args.pool_max
        )
        runtime = stack.enter_context(LocalRuntime(TEMPLATE, port=0, env=env, sqs_endpoint=sqs.url))
        service_log.capture("runtime")
        # A line (or a traceback) per failed poll, connect and batch otherwise; the figures
        # below say what failed.
        for name in ("context_ledger.local.queues", "psycopg.pool"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        settings = get_settings()
        queue = boto3.session.Session().client(
            "sqs", endpoint_url=sqs.url, region_name=runtime.region
        )
        queue_url = runtime.queue_url(ATTRIBUTION_QUEUE)
        if args.visibility_timeout is not None:
            queue.set_queue_attributes(
                QueueUrl=queue_url, Attributes={"VisibilityTimeout": str(args.visibility_timeout)}
            )
        attributes = queue.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])[
            "Attributes"
        ]
        print(
            f"[{time.perf_counter() - started:6.0f} s] runtime on {runtime.url}; attribution "
            f"queue: visibility timeout {attributes['VisibilityTimeout']} s, redrive "
            f"{attributes.get('RedrivePolicy')}; pool {args.pool_max} connections, checkout "
            f"timeout {settings.db_pool_timeout_seconds:.0f} s; embeddings query timeout "
            f"{settings.embeddings_query_timeout_seconds:.0f} s; seeding",
            flush=True,
        )
        seeded, watch, dlq, lag = seed_and_watch(
            runtime, keys, database_url, memories=args.memories, started=started
        )
        with writer_processes(runtime, args.writers, service_log.directory) as writers:
            chosen = [faults(server, sqs, embeddings, writers, settings)[f] for f in args.faults]
            seconds = WARMUP_SECONDS + len(chosen) * args.repetitions * schedule.slot + 5.0
            plan = LoadPlan(
                url=runtime.url,
                tokens=seeded.tokens,
                project_space_id=seeded.project_space_id,
                clients=args.clients,
                seconds=seconds,
                phase="faults",
                seed=args.seed,
            )
            with ThreadPoolExecutor(1) as pool:
                # Every retrieval's record is waited for: a batch lost with a writer shows.
                load = pool.submit(run_phase, plan, watch, lag, started, 1)
                outages = run_faults(chosen, args.repetitions, schedule, watch, started)
                phase = load.result()
            watch.phase = "drain"
            print(f"[{time.perf_counter() - started:6.0f} s] waiting for the queue to drain")
            drained = drain(watch, lag, args.drain_timeout)
            deliveries = delivery_line(runtime, writers, dlq)
        watch.stop()
        lag.stop()
        found = evidence(seeded.org_id, phase.attribution_ids, dlq)
        print(f"[{time.perf_counter() - started:6.0f} s] verifying the chains")
        chains = verify_chains()
        logs = service_log.summary()

    samples = phase.samples
    print(
        f"\n{args.clients} clients for {phase.seconds:.0f} s: {len(samples)} requests, "
        f"{len(samples) / phase.seconds:.1f}/s; machine: {os.cpu_count()} cores shared, load "
        f"average {', '.join(f'{v:.1f}' for v in os.getloadavg())}"
    )
    for fault in chosen:
        mine = [o for o in outages if o.fault == fault.name]
        print_fault(figures_of(fault, mine, samples, lag.lags, schedule), schedule)

    counts = found.counts
    print(f"\nqueue drained: {'yes' if drained else f'NO within {args.drain_timeout:.0f} s'}")
    print(
        f"reconciliation: retrievals answered 200 = {counts.answered}; attribution records "
        f"{counts.records} + dead-letter messages {counts.dead_letters} = "
        f"{counts.records + counts.dead_letters} -> {'OK' if counts.ok else 'FAILED'}"
    )
    print(
        f"records lost: {found.lost} (answered ids without a record {counts.missing}, dead "
        f"letters {counts.dead_letters}); duplicates: {found.duplicates} ({found.entries} "
        f"attribution entries in the chain, {found.rows} attribution ids); records of "
        f"retrievals not answered 200: {found.extra_records}"
    )
    print(deliveries)
    for chain, ok, checked, reason in chains:
        print(f"chain {chain}: {'ok' if ok else f'FAILED ({reason})'}, {checked} entries checked")
    chains_ok = bool(chains) and all(ok for _, ok, _, _ in chains)
    print(logs)
    print(f"total {time.perf_counter() - started:.0f} s")
    return drained and chains_ok and counts.ok and found.lost == 0 and found.duplicates == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8 clients, each fault once")
    parser.add_argument("--clients", type=int, help="concurrent clients (default 12; quick 8)")
    parser.add_argument("--repetitions", type=int, help="injections per fault (3; quick 1)")
    parser.add_argument("--outage-seconds", type=float, help="each outage (8)")
    parser.add_argument("--before-seconds", type=float, help="window before (4; quick 3)")
    parser.add_argument("--after-seconds", type=float, help="window after (8; quick 6)")
    parser.add_argument(
        "--faults", nargs="+", choices=FAULTS, default=list(FAULTS), help="which, in this order"
    )
    parser.add_argument("--memories", type=int, help="memories in the project (300; quick 100)")
    parser.add_argument("--writers", type=int, default=2, help="writer processes (as load.py)")
    parser.add_argument("--pool-max", type=int, help="the runtime's pool (default clients + 8)")
    parser.add_argument(
        "--visibility-timeout",
        type=int,
        help="override the attribution queue's visibility timeout (default: the template's)",
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=300.0, help="seconds to wait for the queue"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the clients' choices")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "clients": 8 if quick else 12,
        "repetitions": 1 if quick else 3,
        "outage_seconds": 8.0,
        "before_seconds": 3.0 if quick else 4.0,
        "after_seconds": 6.0 if quick else 8.0,
        "memories": 100 if quick else 300,
    }
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.pool_max is None:
        args.pool_max = min(100, args.clients + 8)
    if args.writers < 1:
        parser.error("--writers must be at least 1 (the writer fault kills one)")
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    from bench_support import template_log_level

    os.environ["POWERTOOLS_LOG_LEVEL"] = template_log_level()
    from ingest import scratch_database

    with own_postgres() as server, scratch_database() as url:
        ok = run(args, server, url)
    if not ok:
        print("FAILED: see the drain, reconciliation, loss and chain lines above", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
