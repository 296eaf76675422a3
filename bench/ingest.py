"""Ingest throughput: a real code base and a docs corpus through the index-build pipeline.

For each corpus and configuration it opens an index build, adds the documents in batches (as
``context-ledger ingest`` does, through the same use-case functions the API calls), publishes, and
prints files, MB, chunks, tokens, seconds, chunks/s and MB/s. Two baselines are measured in the same
run, because this machine is shared and noisy:

- ``chunk only``: chunking and token counting alone (CPU floor of the pipeline, no database);
- ``COPY raw``: a bare ``COPY`` of the documents' text into a scratch table (database write floor).

Configurations: embeddings off (full-text only) and embeddings through the local OpenAI-compatible
stand-in (hashing provider, loopback HTTP), which shows the cost of the embeddings round trips.

    .venv/bin/python bench/ingest.py                        # this repository + SciFact
    .venv/bin/python bench/ingest.py --docs-limit 1000      # a quicker run

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from bench_support import write_results
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DOCS = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
BATCH_DOCUMENTS = 500
BATCH_BYTES = 2_000_000


@dataclass
class Result:
    corpus: str
    config: str
    files: int
    mb: float
    chunks: int
    tokens: int
    seconds: float

    def row(self) -> str:
        rate = self.chunks / self.seconds if self.seconds else 0.0
        return (
            f"{self.corpus:<10} {self.config:<22} {self.files:>6} {self.mb:>7.2f} {self.chunks:>7} "
            f"{self.tokens:>9} {self.seconds:>8.2f} {rate:>9.0f} {self.mb / self.seconds:>7.2f}"
        )


HEADER = (
    f"{'corpus':<10} {'configuration':<22} {'files':>6} {'MB':>7} {'chunks':>7} {'tokens':>9} "
    f"{'seconds':>8} {'chunks/s':>9} {'MB/s':>7}"
)


@contextmanager
def scratch_database() -> Iterator[str]:
    """A migrated scratch database; DATABASE_URL points at it while the benchmark runs."""
    from context_ledger.db.migrate import migrate
    from context_ledger.local.postgres import ensure_database, start_embedded

    server = None
    base = os.environ.get("DATABASE_URL")
    if base is None:
        folder = Path(tempfile.mkdtemp(prefix="ctxl-bench-"))
        server = start_embedded(folder / "pgdata")
        base = server.get_uri()
    name = f"ctxl_bench_{secrets.token_hex(4)}"
    url = ensure_database(base, name)
    migrate(url)
    os.environ["DATABASE_URL"] = url
    try:
        yield url
    finally:
        from context_ledger.db import close_pool

        close_pool()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        if server is not None:
            server.cleanup()  # stops it; the data directory (1 GB at 100k chunks) stays
            shutil.rmtree(folder, ignore_errors=True)


def code_documents(root: Path) -> list:
    from context_ledger.sources.model import Document
    from context_ledger.sources.walk import iter_text_files

    return [Document(path, text) for path, text in iter_text_files(root)]


def docs_documents(corpus: Path, limit: int | None) -> list:
    from context_ledger.sources.model import Document

    documents = []
    with corpus.open() as handle:
        for line in handle:
            record = json.loads(line)
            text = f"# {record.get('title', '')}\n\n{record['text']}"
            documents.append(Document(f"{record['_id']}.md", text))
            if limit and len(documents) >= limit:
                break
    return documents


def batches(documents: Sequence) -> Iterator[list]:
    batch, size = [], 0
    for document in documents:
        doc_size = len(document.content.encode())
        if batch and (len(batch) >= BATCH_DOCUMENTS or size + doc_size > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(document)
        size += doc_size
    if batch:
        yield batch


def megabytes(documents: Sequence) -> float:
    return sum(len(d.content.encode()) for d in documents) / 1e6


def chunk_only(name: str, documents: Sequence, kind) -> Result:
    from context_ledger.sources.chunking import chunk_document

    started = time.perf_counter()
    chunks = [
        c
        for d in tqdm(documents, desc=f"{name}: chunk only", leave=False)
        for c in chunk_document(d, kind=kind)
    ]
    seconds = time.perf_counter() - started
    return Result(
        name,
        "chunk only (baseline)",
        len(documents),
        megabytes(documents),
        len(chunks),
        sum(c.token_count for c in chunks),
        seconds,
    )


def copy_raw(name: str, documents: Sequence, url: str) -> Result:
    started = time.perf_counter()
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TEMP TABLE raw_documents (path text, content text)")
        with conn.cursor() as cursor, cursor.copy("COPY raw_documents FROM STDIN") as copy:
            for document in documents:
                copy.write_row((document.path, document.content))
    seconds = time.perf_counter() - started
    return Result(name, "COPY raw (baseline)", len(documents), megabytes(documents), 0, 0, seconds)


def ingest(name: str, config: str, documents: Sequence, kind, embedder) -> Result:
    from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
    from context_ledger.db import connection
    from context_ledger.dlp.classification import Classification
    from context_ledger.sources import service
    from context_ledger.spaces.service import create_organisation

    with connection() as conn:
        org = create_organisation(conn, name=f"bench {name} {config}")
    admin = Principal(
        org_id=org.id, user_id="bench", client_id="bench", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )
    started = time.perf_counter()
    with connection() as conn:
        source = service.create_source(
            conn,
            admin,
            space_id=org.space_id,
            kind=kind,
            name=name,
            classification=Classification.INTERNAL,
        )
        version = service.open_build(conn, admin, source["id"])["version"]
    with tqdm(total=len(documents), desc=f"{name}: {config}", leave=False) as bar:
        for batch in batches(documents):
            with connection() as conn:
                service.add_build_documents(
                    conn, admin, source["id"], version, batch, embedder=embedder
                )
            bar.update(len(batch))
    with connection() as conn:
        counts = service.publish_build(conn, admin, source["id"], version).counts
    seconds = time.perf_counter() - started
    return Result(
        name, config, counts.documents, megabytes(documents), counts.chunks, counts.tokens, seconds
    )


def run(corpora: list[tuple[str, list, object]], url: str, report: Callable[[Result], None]):
    from context_ledger.embeddings.client import EmbeddingsClient
    from context_ledger.local.embeddings_server import serve_embeddings

    for name, documents, kind in corpora:
        report(chunk_only(name, documents, kind))
        report(copy_raw(name, documents, url))
        report(ingest(name, "embeddings off", documents, kind, None))
        with serve_embeddings(dims=128) as server:
            client = EmbeddingsClient(server.url, "hashing-128", dimensions=128)
            report(ingest(name, "embeddings stand-in", documents, kind, client))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=REPO, help="code base to ingest")
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS, help="BEIR corpus.jsonl")
    parser.add_argument("--docs-limit", type=int, help="ingest only the first N docs")
    parser.add_argument("--json", type=Path, help="also write the rows here (bench/suite.py)")
    args = parser.parse_args(argv)
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")

    from context_ledger.sources.model import SourceKind

    corpora = [("code", code_documents(args.code), SourceKind.CODEBASE)]
    if args.docs.exists():
        corpora.append(("docs", docs_documents(args.docs, args.docs_limit), SourceKind.DOCS))
    else:
        print(f"no docs corpus at {args.docs}; code only", file=sys.stderr)
    results: list[Result] = []

    def report(result: Result) -> None:
        results.append(result)
        print(result.row(), flush=True)

    with scratch_database() as url:
        print(HEADER)
        run(corpora, url, report)
    write_results(args.json, {"docs_limit": args.docs_limit, "rows": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
