"""Re-embedding throughput: memories/s of the background job after a model change, with MiniLM.

The situation the job exists for: N memories (default 1,000) written while the service had no
embeddings endpoint (the in-process hashing provider, 128 dimensions), then the endpoint set to
all-MiniLM-L6-v2. Each row embeds the same N memory texts, interleaved ``--repeat`` times:

- ``bare model``: ``MiniLMEmbeddingProvider.encode`` in this process, batches of
  ``KEYSTONE_CONTEXT_EMBEDDINGS_BATCH_SIZE`` (32): the model alone, the ceiling.
- ``bare endpoint``: the same batches POSTed to the endpoint as OpenAI embeddings requests on one
  kept-alive connection: the embed calls the job cannot do without (HTTP, JSON, the model), no
  database, no DLP gate (the bench holds no client to send with: only the gate sends through
  one, ``tests/unit/test_dlp_gate_only_path.py``).
- ``reembed``: ``memory.reembed.reembed`` over every stale memory, what ``MemoryReembedFunction``
  and ``context-ledger memories reembed`` run: per batch the stale entries locked (``FOR UPDATE
  SKIP LOCKED``), their contents redacted by the DLP gate and embedded by one request, vectors
  and chunk vectors stored, committed. Before each repeat every memory is made stale again (its
  provider set back to the hashing one's).
- ``reembed, nothing stale``: the same call once all are current (what every sweep costs then).

The endpoint is the embeddings stand-in serving ``MiniLMService`` (the embeddings function's own
model code and wire format) on loopback, in this process, with ``OPENBLAS_NUM_THREADS=1`` as the
template gives the function; ``make dev`` serves the same model behind the local API Gateway and
authorizer, a few ms per request more. Data: SciFact sentences, one to three per memory
(bench/relevant.py's ``memory_texts``).

    .venv/bin/python bench/memory_reembed.py                     # 1,000 memories, once
    .venv/bin/python bench/memory_reembed.py --memories 300 --repeat 3

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import os

# Read by OpenBLAS when numpy loads: one thread, as the template sets for EmbeddingsFunction.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # after the BLAS setting, which must precede numpy
import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench_support import write_results

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "scifact"
PROJECT = "scifact-memories"
WRITE_BATCH = 100


@dataclass(frozen=True)
class Row:
    name: str
    memories: int
    seconds: list[float]

    @property
    def rate(self) -> float:
        """Memories per second, of the median run."""
        ordered = sorted(self.seconds)
        median = ordered[len(ordered) // 2]
        return self.memories / median if median else 0.0

    def line(self, baseline: Row | None = None) -> str:
        if baseline is None:  # nothing stale: what the run costs, not a rate
            runs = ", ".join(f"{s * 1000:.0f}" for s in self.seconds)
            return f"{self.name:<26} {self.memories:>7,} {'-':>12} {'':>8}   [{runs}] ms"
        runs = ", ".join(f"{s:.1f}" for s in self.seconds)
        share = f"{self.rate / baseline.rate:.0%}" if baseline.rate else ""
        return f"{self.name:<26} {self.memories:>7,} {self.rate:>12.1f} {share:>8}   [{runs}] s"


HEADER = f"{'row':<26} {'memories':>7} {'memories/s':>12} {'of bare':>8}   runs"


def write_memories(texts: list[str]) -> tuple[object, object]:
    """The memories as a service without an endpoint writes them (hashing provider, 128d)."""
    from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
    from context_ledger.db import connection
    from context_ledger.memory import service
    from context_ledger.memory.embedding import memory_embedder
    from context_ledger.memory.projects import find_project
    from context_ledger.settings import load_settings
    from context_ledger.spaces.permissions import Permission
    from context_ledger.spaces.service import create_organisation

    settings = load_settings()
    deps = service.Dependencies(settings=settings, embedder=memory_embedder(settings))
    with connection() as conn:
        org = create_organisation(conn, name="bench reembed")
    caller = Principal(
        org_id=org.id, user_id="bench", client_id="bench", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )
    fields = {"type": "fact", "confidence": 1.0, "importance": 0.5, "metadata": {}}
    for start in range(0, len(texts), WRITE_BATCH):
        items = [
            service.NewMemory(fields=fields | {"content": text})
            for text in texts[start : start + WRITE_BATCH]
        ]
        with connection() as conn:
            service.create_memories(conn, caller, PROJECT, items=items, deps=deps)
    with connection() as conn:
        space_id = find_project(conn, caller, PROJECT, Permission.SEARCH).space_id
    return caller, space_id


def make_stale(hashing_provider: str) -> None:
    """Every memory back to the hashing provider's vector label: all stale for MiniLM again."""
    from context_ledger.db import connection

    with connection() as conn:
        conn.execute("UPDATE memory_entries SET embedding_provider = %s", [hashing_provider])


def run(args: argparse.Namespace) -> list[Row]:
    import httpx
    from relevant import memory_texts  # bench/ is the script's folder, first on sys.path

    from context_ledger.embeddings.client import EmbeddingsClient
    from context_ledger.embeddings.hashing import HashingEmbeddingProvider
    from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider
    from context_ledger.embeddings.serving import MiniLMService
    from context_ledger.local.embeddings_server import serve_embeddings
    from context_ledger.memory.embedding import MemoryEmbedder
    from context_ledger.memory.reembed import reembed
    from context_ledger.settings import load_settings

    texts = memory_texts(args.corpus)[: args.memories]
    if len(texts) < args.memories:
        raise SystemExit(f"the corpus holds {len(texts)} memory texts, fewer than asked")
    started = time.perf_counter()
    write_memories(texts)
    print(
        f"# {len(texts):,} memories written with the hashing provider in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    hashing = HashingEmbeddingProvider()
    model = MiniLMEmbeddingProvider()
    settings = load_settings()
    batch = settings.embeddings_batch_size
    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    model.encode(texts[:batch])  # warm: first-call allocations
    seconds: dict[str, list[float]] = {
        "bare model": [],
        "bare endpoint": [],
        "reembed": [],
        "reembed, nothing stale": [],
    }
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(serve_embeddings(0, service=MiniLMService(model)))
        client = EmbeddingsClient(
            endpoint.url, "all-MiniLM-L6-v2", dimensions=384, batch_size=batch, timeout=120
        )
        bare = stack.enter_context(httpx.Client(base_url=endpoint.url, timeout=120))
        request = {"model": client.model, "dimensions": 384, "encoding_format": "float"}
        embedder = MemoryEmbedder(embedder=client, name=client.model, dimensions=384, client=client)
        for repeat in range(args.repeat):
            timer = time.perf_counter()
            for chunk in batches:
                model.encode(chunk)
            seconds["bare model"].append(time.perf_counter() - timer)
            timer = time.perf_counter()
            for chunk in batches:
                answer = bare.post("/embeddings", json=request | {"input": chunk})
                assert len(answer.raise_for_status().json()["data"]) == len(chunk)
            seconds["bare endpoint"].append(time.perf_counter() - timer)
            if repeat:
                make_stale(f"{hashing.name}/{hashing.dimensions}")
            timer = time.perf_counter()
            done = reembed(embedder=embedder, settings=settings)
            seconds["reembed"].append(time.perf_counter() - timer)
            if done.reembedded != len(texts) or done.remaining:
                raise SystemExit(f"re-embedded {done.reembedded} of {len(texts)}: {done}")
            timer = time.perf_counter()
            again = reembed(embedder=embedder, settings=settings)
            seconds["reembed, nothing stale"].append(time.perf_counter() - timer)
            assert again.reembedded == 0
            print(
                f"# repeat {repeat + 1}: "
                + ", ".join(f"{name} {values[-1]:.1f} s" for name, values in seconds.items()),
                flush=True,
            )
    return [Row(name, len(texts), values) for name, values in seconds.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=1, help="interleaved runs of each row")
    parser.add_argument("--corpus", type=Path, default=DATA / "corpus.jsonl")
    parser.add_argument("--json", type=Path, help="also write the rows here (bench/suite.py)")
    args = parser.parse_args(argv)
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    os.environ["POWERTOOLS_LOG_LEVEL"] = "ERROR"
    for name in ("URL", "MODEL", "DIMENSIONS"):  # written without an endpoint: hashing, 128d
        os.environ.pop(f"KEYSTONE_CONTEXT_EMBEDDINGS_{name}", None)
    from ingest import scratch_database

    started = time.perf_counter()
    print(
        f"# load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} cores",
        flush=True,
    )
    with scratch_database():
        rows = run(args)
    print()
    print(HEADER)
    bare = rows[0]
    for row in rows:
        print(row.line(bare if row.name != "reembed, nothing stale" else None))
    endpoint, job = rows[1], rows[2]
    print(f"\nthe job runs at {job.rate / endpoint.rate:.0%} of the bare embed calls' rate")
    print(
        f"# load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
        f"total {time.perf_counter() - started:.0f} s"
    )
    write_results(args.json, {"memories": args.memories, "repeat": args.repeat, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
