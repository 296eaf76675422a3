"""Rate limits: does a noisy tenant starve a quiet one, and what does the limiter cost?

The local runtime (template.yaml on loopback: API Gateway, the authorizer, every function, moto
SQS, the hashing embeddings and echo model stand-ins; ``bench/load.py``'s ``stand_ins`` and
``runtime_env``) runs in this process over a scratch database. Two organisations, each with a
project whose docs source holds this repository's ``docs/``: a *quiet* tenant with 2 clients and
a *noisy* one with ``--noisy-clients`` clients, each with an API key of its own, all hammering
``POST /api/v1/context/retrieve``. The clients run in a child process (asyncio + httpx), so they
do not share the runtime's interpreter lock.

First the limiter's cost: the capabilities and retrieve handlers invoked in-process (the runtime's
invoker, an authorizer context, no HTTP), interleaved call by call, with the limits on (the quiet
tenant's API key: organisation and key buckets, rates too high to refuse) and off (the noisy
tenant's reader as a token, its organisation's limit 0: no statement; same data), p50/p95 each,
and the limiter's statement alone (``ratelimit.store.take`` on a pooled connection, two buckets)
against ``SELECT 1`` the same way. It runs before the tenants' phases: their attribution backlog
keeps the runtime's writer thread busy for a while, and its hold on the interpreter lock would be
added to every database round trip measured here (an artefact of one process serving every
function; Lambda runs the writer elsewhere).

Then the phases, one run, same data:

1. ``quiet alone``: the quiet tenant only;
2. ``noisy, limited``: both tenants, the noisy organisation limited to ``--noisy-limit`` requests
   a minute (``KEYSTONE_RATE_LIMIT_ORG_OVERRIDES``; burst ``KEYSTONE_RATE_LIMIT_BURST_SECONDS``),
   its clients ignoring ``Retry-After`` (the worst neighbour);
3. ``noisy waits, limited``: the same, its clients waiting as long as ``Retry-After`` says;
4. ``noisy, unlimited``: both tenants, every limit off (``0``): what the limit protects against.

Printed per phase and tenant: requests, answers by status, req/s admitted, p50/p95 of the 2xx
answers, error rate; then the limiter's cost.

    .venv/bin/python bench/quotas.py                        # under 3 minutes
    .venv/bin/python bench/quotas.py --seconds 10 --calls 50

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
QUIET_CLIENTS = 2
READERS = "readers"
QUERIES = (
    "why does the authorizer answer 401 from the application",
    "evidence chain checkpoints outside the database",
    "one function per endpoint group",
    "api keys hashed with sha-256",
    "memory recency and frequency",
    "streamed answers carry the link outcome",
)
LIMIT_VARIABLES = (
    "KEYSTONE_RATE_LIMIT_ORG_PER_MINUTE",
    "KEYSTONE_RATE_LIMIT_API_KEY_PER_MINUTE",
    "KEYSTONE_RATE_LIMIT_ORG_OVERRIDES",
)
NO_LIMITS = {
    "KEYSTONE_RATE_LIMIT_ORG_PER_MINUTE": "0",
    "KEYSTONE_RATE_LIMIT_API_KEY_PER_MINUTE": "0",
}
#: Counted, never refused: the limiter's cost alone.
UNREACHED_LIMITS = {
    "KEYSTONE_RATE_LIMIT_ORG_PER_MINUTE": "100000000",
    "KEYSTONE_RATE_LIMIT_API_KEY_PER_MINUTE": "100000000",
}

# (tenant, status, seconds, Retry-After or 0)
Sample = tuple[str, int, float, int]


# --- the clients (child process) -----------------------------------------------------------------


@dataclass(frozen=True)
class Tenant:
    name: str
    org_id: str
    #: one per client
    api_keys: tuple[str, ...]
    space_id: str
    #: whether its clients wait as long as a 429's Retry-After says before the next request
    patient: bool = False


@dataclass(frozen=True)
class Plan:
    url: str
    tenants: tuple[Tenant, ...]
    seconds: float


def run_clients(plan: Plan, results: Any) -> None:
    """Child process entry: every tenant's clients until the time is up; put the samples."""
    results.put(asyncio.run(_run_clients(plan)))


async def _run_clients(plan: Plan) -> list[Sample]:
    total = sum(len(t.api_keys) for t in plan.tenants)
    limits = httpx.Limits(max_connections=total, max_keepalive_connections=total)
    deadline = time.monotonic() + plan.seconds
    samples: list[Sample] = []
    async with httpx.AsyncClient(base_url=plan.url, timeout=60, limits=limits) as http:
        await asyncio.gather(
            *(
                _client(http, tenant, index, deadline, samples)
                for tenant in plan.tenants
                for index in range(len(tenant.api_keys))
            )
        )
    return samples


async def _client(
    http: httpx.AsyncClient, tenant: Tenant, index: int, deadline: float, samples: list[Sample]
) -> None:
    headers = {"Authorization": f"Bearer {tenant.api_keys[index]}"}
    sent = index
    while time.monotonic() < deadline:
        body = {"query": QUERIES[sent % len(QUERIES)], "spaceId": tenant.space_id}
        sent += 1
        started = time.perf_counter()
        try:
            response = await http.post("/api/v1/context/retrieve", json=body, headers=headers)
        except httpx.HTTPError:
            samples.append((tenant.name, 0, time.perf_counter() - started, 0))
            continue
        retry = int(response.headers.get("Retry-After", 0))
        samples.append((tenant.name, response.status_code, time.perf_counter() - started, retry))
        if tenant.patient and response.status_code == 429:
            await asyncio.sleep(retry)


def run_phase(plan: Plan) -> list[Sample]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=run_clients, args=(plan, results), name="quota-clients")
    child.start()
    samples = results.get()
    child.join()
    return samples


# --- the tenants (this process) ---------------------------------------------------------------


def seed_tenant(runtime: Any, name: str, clients: int) -> Tenant:
    """An organisation whose readers (an API key per client) may search a project holding this
    repository's docs."""
    from load import ingest_folder  # bench/load.py

    from context_ledger.auth.api_keys import create_api_key
    from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
    from context_ledger.db import connection
    from context_ledger.spaces.service import create_organisation

    with connection() as conn:
        org = create_organisation(conn, name=name)
        admin = create_api_key(
            conn, org_id=org.id, user_id="root", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
        )
        readers = [
            create_api_key(
                conn, org_id=org.id, user_id=f"{name}-reader", groups=frozenset({READERS})
            ).key
            for _ in range(clients)
        ]
    with httpx.Client(
        base_url=runtime.url, headers={"Authorization": f"Bearer {admin.key}"}, timeout=300
    ) as api:
        spaces = "/api/v1/context/spaces"
        project = api.post(spaces, json={"name": f"{name} docs", "level": "project"})
        project.raise_for_status()
        project_id = project.json()["id"]
        grant = {"subject": f"group:{READERS}", "permissions": ["context:space:search"]}
        api.put(f"{spaces}/{project_id}/grants", json=grant).raise_for_status()
        source = api.post(f"{spaces}/{project_id}/sources", json={"kind": "docs", "name": "docs"})
        source.raise_for_status()
    ingest_folder(runtime.url, admin.key, source.json()["id"], REPO / "docs")
    return Tenant(name, str(org.id), tuple(readers), project_id)


def set_limits(**variables: str) -> None:
    """The runtime's rate-limit settings from now on (its functions read them per request)."""
    from context_ledger.settings import get_settings

    for name in LIMIT_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(variables)
    get_settings.cache_clear()


# --- the limiter's cost --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    name: str
    on: list[float]
    off: list[float]


def handler_event(
    tenant: Tenant, counted: bool, method: str, path: str, body: dict | None
) -> dict[str, Any]:
    """A payload 2.0 event as API Gateway sends it after the authorizer admitted the tenant's
    reader: as an API key when ``counted`` (an organisation and a key bucket), else as a token
    (the organisation's bucket only, and that organisation's limit is off: nothing counted)."""
    from context_ledger.auth.principal import AuthMethod, Principal
    from context_ledger.local.events import ApiInfo, HttpRequest, Stamp, http_event

    caller = Principal(
        org_id=uuid.UUID(tenant.org_id),
        user_id=f"{tenant.name}-reader",
        client_id="quota-bench",
        groups=frozenset({READERS}),
        auth_method=AuthMethod.API_KEY if counted else AuthMethod.JWT,
    )
    headers = [
        ("host", "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"),
        ("authorization", f"Bearer {tenant.api_keys[0]}"),
        ("content-type", "application/json"),
    ]
    request = HttpRequest(method, path, headers, json.dumps(body).encode() if body else b"")
    return http_event(
        request,
        route_key=f"{method} {path}",
        path_parameters={},
        api=ApiInfo(api_id="a1b2c3d4e5", region="us-east-1"),
        stamp=Stamp.new(),
        authorizer_context=caller.to_authorizer_context(),
    )


#: (tenant, counted, call number) -> the event of one call
EventOf = Callable[[Tenant, bool, int], dict[str, Any]]


def handler_cost(
    runtime: Any, name: str, function: str, event: EventOf, tenants: Sequence[Tenant], calls: int
) -> Cost:
    """The handler's seconds per call, limits on (the first tenant's API key: its organisation
    and key counted, rates too high to refuse) and off (the second tenant's token, its
    organisation's limit 0: no statement), interleaved call by call, the order alternating."""
    counted, uncounted = tenants
    set_limits(**UNREACHED_LIMITS, KEYSTONE_RATE_LIMIT_ORG_OVERRIDES=f"{uncounted.org_id}=0")
    times: dict[bool, list[float]] = {True: [], False: []}
    for call in range(calls + 1):
        for on in (True, False) if call % 2 else (False, True):
            tenant = counted if on else uncounted
            started = time.perf_counter()
            answer = runtime.invoke(function, event(tenant, on, call))
            seconds = time.perf_counter() - started
            if answer["statusCode"] != 200:
                raise RuntimeError(f"{name} answered {answer['statusCode']}: {answer['body']}")
            if call:  # the first round warms both callers' caches
                times[on].append(seconds)
    set_limits()
    return Cost(name, times[True], times[False])


def statement_cost(calls: int) -> tuple[list[float], list[float]]:
    """``ratelimit.store.take`` alone, as the dependency runs it (an organisation's and an API
    key's bucket on a pooled connection in autocommit), and ``SELECT 1`` the same way, call by
    call: (limiter seconds, baseline seconds)."""
    from context_ledger.db import get_pool
    from context_ledger.ratelimit import store
    from context_ledger.ratelimit.buckets import Bucket, BucketKind

    buckets = [
        Bucket(BucketKind.ORGANISATION, os.urandom(32), 1_000_000, 10),
        Bucket(BucketKind.API_KEY, os.urandom(32), 1_000_000, 10),
    ]

    def timed(statement: Callable[[Any], object]) -> float:
        started = time.perf_counter()
        with get_pool().connection() as conn:
            conn.autocommit = True
            try:
                statement(conn)
            finally:
                conn.autocommit = False
        return time.perf_counter() - started

    limiter, baseline = [], []
    for _ in range(calls):
        limiter.append(timed(lambda conn: store.take(conn, buckets)))
        baseline.append(timed(lambda conn: conn.execute("SELECT 1").fetchall()))
    return limiter, baseline


# --- the report ----------------------------------------------------------------------------------


def ms(values: Sequence[float], q: float) -> float:
    from load import percentile  # bench/load.py

    return percentile(values, q) * 1000 if values else float("nan")


def print_phase(phase: str, samples: Sequence[Sample], seconds: float) -> None:
    for tenant in ("quiet", "noisy"):
        mine = [s for s in samples if s[0] == tenant]
        if not mine:
            continue
        ok = [s[2] for s in mine if 200 <= s[1] < 300]
        refused = [s for s in mine if s[1] == 429]
        errors = [s for s in mine if s[1] != 429 and not 200 <= s[1] < 300]
        statuses = dict(sorted(Counter(s[1] for s in mine).items()))
        waits = [s[3] for s in refused]
        retry = f" Retry-After {min(waits)}-{max(waits)} s" if waits else ""
        print(
            f"{phase:<20} {tenant:<6} {len(mine):>6} {len(ok) / seconds:>9.1f} "
            f"{ms(ok, 0.5):>8.1f} {ms(ok, 0.95):>8.1f} {len(errors) / len(mine) * 100:>7.2f}% "
            f"{len(refused):>6}  {statuses}{retry}"
        )


def print_costs(
    costs: Sequence[Cost], statement: Sequence[float], baseline: Sequence[float]
) -> None:
    print(
        f"\n{'handler, in-process':<22} {'n':>5} {'on p50':>8} {'on p95':>8} {'off p50':>8}"
        f" {'off p95':>8} {'p50 added':>10}"
    )
    for cost in costs:
        added = (statistics.median(cost.on) - statistics.median(cost.off)) * 1000
        print(
            f"{cost.name:<22} {len(cost.on):>5} {ms(cost.on, 0.5):>8.2f} {ms(cost.on, 0.95):>8.2f}"
            f" {ms(cost.off, 0.5):>8.2f} {ms(cost.off, 0.95):>8.2f} {added:>10.2f}"
        )
    print(
        f"{'limiter statement':<22} {len(statement):>5} {ms(statement, 0.5):>8.2f}"
        f" {ms(statement, 0.95):>8.2f} {ms(baseline, 0.5):>8.2f} {ms(baseline, 0.95):>8.2f}"
        f" {(statistics.median(statement) - statistics.median(baseline)) * 1000:>10.2f}"
    )
    print(
        "(the statement row: pool checkout + store.take over 2 buckets, against pool checkout +"
        " SELECT 1 in the off columns, interleaved)"
    )
    print("(ms; on: an API key, organisation and key counted, never refused; off: no limit)")


# --- main ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace, database_url: str) -> None:
    from bench_support import scratch_dir
    from gateway import silence_log_output  # bench/gateway.py
    from load import runtime_env, stand_ins  # bench/load.py

    from context_ledger.auth.local_keys import ensure_local_keys
    from context_ledger.local.runtime import LocalRuntime
    from context_ledger.settings import get_settings

    started = time.perf_counter()
    home = scratch_dir("ctxl-quotas-home-")
    keys = ensure_local_keys(home)
    with stand_ins() as (embeddings_url, provider_url):
        pool_max = min(100, args.noisy_clients + QUIET_CLIENTS + 8)
        env = runtime_env(home, keys, database_url, embeddings_url, provider_url, pool_max)
        with LocalRuntime(TEMPLATE, port=0, env=env) as runtime:
            silence_log_output()
            set_limits()
            burst = get_settings().rate_limit_burst_seconds
            quiet = seed_tenant(runtime, "quiet", QUIET_CLIENTS)
            noisy = seed_tenant(runtime, "noisy", args.noisy_clients)
            print(f"[{time.perf_counter() - started:5.0f} s] seeded two tenants", flush=True)
            # First, while no attribution backlog keeps the runtime's writer thread busy: its
            # hold on the interpreter lock would add to every database round trip here.
            print(f"[{time.perf_counter() - started:5.0f} s] the limiter's cost", flush=True)
            capabilities = handler_cost(
                runtime,
                "capabilities",
                "ContextAdminFunction",
                lambda tenant, counted, _: handler_event(
                    tenant, counted, "GET", "/api/v1/context/capabilities", None
                ),
                (quiet, noisy),
                args.calls,
            )
            statement, baseline = statement_cost(args.calls)
            retrieve = handler_cost(
                runtime,
                "retrieve",
                "RetrieveFunction",
                lambda tenant, counted, call: handler_event(
                    tenant,
                    counted,
                    "POST",
                    "/api/v1/context/retrieve",
                    {"query": QUERIES[call % len(QUERIES)], "spaceId": tenant.space_id},
                ),
                (quiet, noisy),
                args.calls,
            )
            noisy_limited = {
                "KEYSTONE_RATE_LIMIT_ORG_OVERRIDES": f"{noisy.org_id}={args.noisy_limit}"
            }
            phases = [
                ("quiet alone", (quiet,), {}),
                ("noisy, limited", (quiet, noisy), noisy_limited),
                ("noisy waits, limited", (quiet, replace(noisy, patient=True)), noisy_limited),
                ("noisy, unlimited", (quiet, noisy), NO_LIMITS),
            ]
            results = []
            for phase, tenants, limits in phases:
                set_limits(**limits)
                print(f"[{time.perf_counter() - started:5.0f} s] {phase}", flush=True)
                results.append((phase, run_phase(Plan(runtime.url, tenants, args.seconds))))
            set_limits()

    print(
        f"\n{QUIET_CLIENTS} quiet clients; {args.noisy_clients} noisy clients;"
        f" noisy limit {args.noisy_limit}/min, burst {burst:g} s; {args.seconds:.0f} s a phase"
    )
    print(
        f"{'phase':<20} {'tenant':<6} {'sent':>6} {'2xx req/s':>9} {'p50 ms':>8} {'p95 ms':>8}"
        f" {'errors':>8} {'429':>6}  statuses"
    )
    for phase, samples in results:
        print_phase(phase, samples, args.seconds)
    print("(latency of 2xx answers; errors: answers neither 2xx nor 429)")
    print_costs([retrieve, capabilities], statement, baseline)
    load_average = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(
        f"\nmachine: {os.cpu_count()} cores shared with other work; load average {load_average};"
        f" total {time.perf_counter() - started:.0f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="duration of each phase")
    parser.add_argument("--noisy-clients", type=int, default=16, help="the noisy tenant's clients")
    parser.add_argument(
        "--noisy-limit", type=int, default=600, help="the noisy organisation's requests a minute"
    )
    parser.add_argument(
        "--calls", type=int, default=100, help="calls per route and side for the limiter's cost"
    )
    args = parser.parse_args(argv)
    if min(args.seconds, args.noisy_clients, args.noisy_limit, args.calls) <= 0:
        parser.error("--seconds, --noisy-clients, --noisy-limit and --calls must be positive")
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from ingest import scratch_database  # bench/ingest.py

    with scratch_database() as url:
        run(args, url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
