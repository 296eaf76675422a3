"""Model gateway added latency: the gateway's Lambda handler in-process against a direct call to
the stand-in provider, in the same run, interleaved call by call.

- ``direct``: the request body POSTed straight to the stand-in provider
  (``context_ledger.local.provider_server``) over a kept-alive httpx connection, the whole answer
  read. This is what a client without the gateway would wait for.
- ``gateway``: ``functions/model_gateway/app.py``'s ``handler(event, context)``, loaded by file path
  as the local runtime loads it, called with an HTTP API payload 2.0 event whose authorizer
  context carries the caller: Mangum → FastAPI → header rules → the provider call (the same
  stand-in) → link → model call log row. What the gateway adds on top of the provider is the
  difference.

Three cases, each measured on its own:

- ``plain``: a chat completion naming no retrieval (forward + log);
- ``linked``: naming a recorded retrieval (forward + lookup + link entry appended to the HMAC
  chain + log); every call links a new response id, so the chain grows as in production;
- ``stream``: a streamed chat completion naming the retrieval (linked as the answer starts, its
  outcome a header, then the SSE answer passed through, then the log).

Printed per case: p50, p95 and mean of both, and the added latency as the median and p95 of the
per-call differences (gateway minus direct of the same iteration; the order within an iteration
alternates, so neither side always runs on a warmer machine). Log lines (the link audit) are
formatted as in production but written to /dev/null.

    .venv/bin/python bench/gateway.py                 # 300 calls per case
    .venv/bin/python bench/gateway.py --calls 100     # quicker

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from bench_support import load_function, scratch_dir, write_results

REPO = Path(__file__).resolve().parents[1]
ROUTE_KEY = "POST /api/v1/models/chat/completions"
WARMUP = 10
CHAT = {"model": "echo-1", "messages": [{"role": "user", "content": "How are refunds authorised?"}]}
STREAM = {**CHAT, "stream": True, "stream_options": {"include_usage": True}}


def gateway_event(caller: Any, body: bytes, context_request_id: str | None) -> dict[str, Any]:
    from context_ledger.local.events import ApiInfo, HttpRequest, Stamp, http_event

    headers = [
        ("host", "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"),
        ("content-type", "application/json"),
        ("accept", "application/json"),
        ("user-agent", "context-ledger-bench/1"),
        ("x-keystone-client", "bench/1.0"),
    ]
    if context_request_id is not None:
        headers.append(("x-keystone-context-request-id", context_request_id))
    request = HttpRequest("POST", "/api/v1/models/chat/completions", headers, body)
    return http_event(
        request,
        route_key=ROUTE_KEY,
        path_parameters={},
        api=ApiInfo(api_id="a1b2c3d4e5", region="us-east-1"),
        stamp=Stamp.new(),
        authorizer_context=caller.to_authorizer_context(),
    )


@dataclass(frozen=True)
class Stats:
    p50: float
    p95: float
    mean: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Stats:
        ms = sorted(s * 1000 for s in seconds)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        return cls(statistics.median(ms), p95, statistics.fmean(ms))


@dataclass(frozen=True)
class Row:
    case: str
    direct: Stats
    gateway: Stats
    added: Stats

    def line(self) -> str:
        d, g, a = self.direct, self.gateway, self.added
        return (
            f"{self.case:<7} {d.p50:>7.2f} {d.p95:>7.2f} {d.mean:>7.2f}   "
            f"{g.p50:>7.2f} {g.p95:>7.2f} {g.mean:>7.2f}   {a.p50:>7.2f} {a.p95:>7.2f}"
        )


HEADER = (
    "case     direct ms (p50 / p95 / mean)   gateway ms (p50 / p95 / mean)   added ms (p50 / p95)"
)


def measure(
    case: str,
    *,
    calls: int,
    direct: Callable[[], None],
    gateway: Callable[[], None],
) -> Row:
    def timed(call: Callable[[], None]) -> float:
        started = time.perf_counter()
        call()
        return time.perf_counter() - started

    for _ in range(WARMUP):
        direct()
        gateway()
    direct_s: list[float] = []
    gateway_s: list[float] = []
    for i in range(calls):
        if i % 2:
            gateway_s.append(timed(gateway))
            direct_s.append(timed(direct))
        else:
            direct_s.append(timed(direct))
            gateway_s.append(timed(gateway))
    added = [g - d for g, d in zip(gateway_s, direct_s, strict=True)]
    return Row(case, Stats.of(direct_s), Stats.of(gateway_s), Stats.of(added))


def silence_log_output() -> None:
    """Keep formatting every log line (a production cost) but write them nowhere."""
    from context_ledger.log import logger

    sink = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the process)
    for handler in logging.getLogger(logger.service).handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(sink)


def run(calls: int, report: Callable[[str], None]) -> list[Row]:
    from context_ledger.attribution.events import AttributionEvent
    from context_ledger.attribution.writer import write_attribution
    from context_ledger.auth.principal import Principal
    from context_ledger.db import connection
    from context_ledger.evidence.keys import get_key_ring
    from context_ledger.local.provider_server import serve_provider
    from context_ledger.settings import get_settings
    from context_ledger.spaces.service import create_organisation

    with serve_provider() as provider, httpx.Client(timeout=30) as direct_client:
        os.environ["KEYSTONE_MODELS_PROVIDER_URL"] = provider.url
        get_settings.cache_clear()
        with connection() as conn:
            org = create_organisation(conn, name="Bench")
        caller = Principal(org_id=org.id, user_id="alice", client_id="bench")
        event = AttributionEvent.model_validate(
            {
                "recordId": str(uuid.uuid4()),
                "category": "context_attribution",
                "orgId": str(org.id),
                "record": {
                    "requestId": f"req_{uuid.uuid4().hex}",
                    "attributionId": str(uuid.uuid4()),
                    "userId": "alice",
                },
            }
        )
        with connection() as conn:
            write_attribution(conn, event=event, keys=get_key_ring())
        handler = load_function("ModelGatewayFunction")
        silence_log_output()
        rows = []
        for case, document, context_request_id in [
            ("plain", CHAT, None),
            ("linked", CHAT, event.record.request_id),
            ("stream", STREAM, event.record.request_id),
        ]:
            body = json.dumps(document).encode()

            def direct(body: bytes = body) -> None:
                response = direct_client.post(
                    f"{provider.url}/chat/completions",
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
                response.raise_for_status()

            def gateway(body: bytes = body, context_request_id: str | None = context_request_id):
                answer = handler(gateway_event(caller, body, context_request_id))
                if answer["statusCode"] != 200:
                    raise RuntimeError(f"gateway answered {answer['statusCode']}: {answer}")
                if context_request_id and "linked" not in json.dumps(answer):
                    raise RuntimeError("the gateway did not link the call")

            row = measure(case, calls=calls, direct=direct, gateway=gateway)
            report(row.line())
            rows.append(row)
        return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="measured calls per case")
    parser.add_argument("--json", type=Path, help="also write the rows here (bench/suite.py)")
    args = parser.parse_args(argv)
    if args.calls < 2:
        parser.error("--calls must be at least 2")
    started = time.perf_counter()
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    if "CONTEXT_LEDGER_HOME" not in os.environ:
        os.environ["CONTEXT_LEDGER_HOME"] = str(scratch_dir("ctxl-bench-home-"))
    os.environ.setdefault("KEYSTONE_EVIDENCE_HMAC_KEY", secrets.token_hex(32))
    from ingest import scratch_database  # bench/ is the script's folder, first on sys.path

    with scratch_database():
        print(HEADER)
        rows = run(args.calls, lambda line: print(line, flush=True))
    print(f"total {time.perf_counter() - started:.0f} s")
    write_results(args.json, {"calls": args.calls, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
