"""Retrieval quality on BEIR-format datasets, through the retrieve use case, beside offline
references computed from the same dataset in the same run.

For each dataset (a folder with ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``)
and embeddings provider it creates an organisation, a project space and a source through the
use-case functions the API calls, ingests the corpus with the index-build pipeline (one document
per corpus record: ``<_id>.md`` holding the title and text for ``docs``, ``<_id>.py`` holding
the code for ``codebase``), and sends every query of the split through
``retrieval.service.retrieve`` (one request per query: ``tokenBudget`` 8000, ``maxPerLevel`` 50,
``excludeRelated``), as a user who may search the space. Configurations:

- ``full-text``: no embeddings endpoint (the text rank alone);
- ``hashing``: hybrid with the hashing provider served by the in-process stand-in (a floor);
- ``minilm``: hybrid with all-MiniLM-L6-v2 served in-process by the embeddings server's MiniLM
  service, or any OpenAI-compatible endpoint given with ``--embeddings-url``.

Full-text rows query the first build with vectors (hashing, else MiniLM) without an embeddings
client (the stored vectors are then never read), so a dataset is ingested once per provider.

Offline references (``bench/reference.py``; ``--no-references`` skips them), backend
``offline``: ``bm25s`` (exhaustive BM25 with query-term repeats over each document's text as
ingested), and for each embeddings provider ``dense`` (cosine over every document's chunk
vectors) and ``fusion`` (0.7 cos + 0.3 BM25/max over the union of each side's top 100, no
tiers); ``dense-hashing`` and ``fusion-hashing`` for the stand-in. Their vectors are the chunk
texts and queries embedded through the same DLP gate and endpoint, so the cache serves them.

Metrics (pytrec_eval, i.e. trec_eval): nDCG@10 and MRR@10 of the documents the answer delivers,
in delivery order (a document's rank is that of its first delivered chunk); Recall@100 of the
ranked candidate list. The API delivers at most ``maxPerLevel`` (50) chunks, so Recall@100 reads
the search step's candidates the same request produced (``Dependencies.cache`` is the injection
point: a cache that records what the use case stores) and orders them with ``search.hybrid.rank``
as the use case does (one source, one level weight: the order is the formula's and tiers').
A reference's nDCG@10 reads its first 10 documents, its Recall@100 its first 100.

At the end it prints issue 27's table (``report.criteria_section``: full-text - bm25s, hybrid -
fusion, hybrid - max(full-text, dense), each met or not within .01) and the model comparison,
merges the rows into ``bench/results/quality.json``, and (unless ``--quick`` or
``--no-document``) rewrites BENCHMARKS.md's quality section, its plot and the table's section of
``docs/retrieval.md`` from that file.

    .venv/bin/python bench/quality.py                                  # SciFact, CoSQA, CACM
    .venv/bin/python bench/quality.py --configs full-text --quick 100  # first 100 queries
    .venv/bin/python bench/quality.py cosqa cacm                       # two of the defaults
    .venv/bin/python bench/quality.py --configs minilm --embeddings-url http://127.0.0.1:8089/v1

The in-process MiniLM keeps every vector it computes in ``~/.cache/context-ledger-eval`` (keyed
by sha256 of model and text; ``--embeddings-cache DIR``, ``--no-embeddings-cache``), so a rerun
after a change to ranking or text processing re-ingests in seconds instead of tens of minutes.
An answer that fell back to full-text (no query vector in time) stops a hybrid run.

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from embeddings_cache import CachedEmbeddings
from quality_results import (
    CRITERIA_PAGE,
    CRITERIA_SECTION,
    QUALITY_RESULTS,
    embeddings_bench,
    load_quality,
    record_quality,
)
from reference import REFERENCE_BACKEND, reference_configs
from report import criteria_section, quality_body, replace_section
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
DEFAULT_DATASETS = [
    f"{DATA / 'scifact'}:docs",
    f"{DATA / 'cosqa'}:codebase",
    f"{DATA / 'cacm'}:docs",
]
CONFIGS = ("full-text", "hashing", "minilm")
DEFAULT_CONFIGS = ["full-text", "minilm"]
REFERENCE_BATCH = 512  # chunk texts per request for the dense reference's vectors
TOKEN_BUDGET = 8000
MAX_PER_LEVEL = 50
BATCH_DOCUMENTS = 250
HASHING_DIMENSIONS = 384
MODEL_TIMEOUT_SECONDS = 300.0
EMBEDDINGS_CACHE = Path.home() / ".cache" / "context-ledger-eval"
MEASURES = {"ndcg_cut_10": "nDCG@10", "recall_100": "Recall@100", "recip_rank": "MRR@10"}


@dataclass(frozen=True)
class Dataset:
    name: str
    kind: str  # a SourceKind value
    corpus: dict[str, dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


@dataclass
class Result:
    dataset: str
    config: str
    backend: str
    queries: int
    metrics: dict[str, float]
    short_answers: int  # answers delivering fewer than 10 distinct documents
    query_ms_p50: float
    ingest_seconds: float
    chunks: int
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        figures = " ".join(f"{self.metrics[m]:>10.3f}" for m in MEASURES)
        return (
            f"{self.dataset:<10} {self.config:<10} {self.backend:<9} {self.queries:>5} {figures}"
            f" {self.short_answers:>6} {self.query_ms_p50:>8.1f}"
        )


HEADER = (
    f"{'dataset':<10} {'config':<10} {'backend':<9} {'n':>5} "
    + " ".join(f"{label:>10}" for label in MEASURES.values())
    + f" {'<10docs':>6} {'p50 ms':>8}"
)


# --- data ---------------------------------------------------------------------------------------


def parse_dataset(raw: str) -> tuple[Path, str]:
    """``PATH[:KIND]``, kind ``docs`` (default) or ``codebase``; or the name of a default
    dataset (``scifact``, ``cosqa``, ``cacm``): its folder and kind."""
    defaults = {Path(d.partition(":")[0]).name: d for d in DEFAULT_DATASETS}
    if raw in defaults:
        raw = defaults[raw]
    path, _, kind = raw.partition(":")
    if kind not in ("", "docs", "codebase"):
        raise argparse.ArgumentTypeError(f"kind must be docs or codebase, not {kind!r}")
    return Path(path), kind or "docs"


def load_dataset(path: Path, kind: str, split: str, limit: int | None) -> Dataset:
    """Corpus, the split's queries (those with judgements, in file order) and its qrels."""
    qrels: dict[str, dict[str, int]] = {}
    with (path / "qrels" / f"{split}.tsv").open(newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        next(reader)  # header: query-id corpus-id score
        for query_id, doc_id, score in reader:
            qrels.setdefault(query_id, {})[doc_id] = int(score)
    queries: dict[str, str] = {}
    with (path / "queries.jsonl").open() as handle:
        for line in handle:
            record = json.loads(line)
            if record["_id"] in qrels:
                queries[record["_id"]] = record["text"]
    if limit is not None:
        queries = dict(list(queries.items())[:limit])
    qrels = {qid: qrels[qid] for qid in queries}
    corpus: dict[str, dict[str, str]] = {}
    with (path / "corpus.jsonl").open() as handle:
        for line in handle:
            record = json.loads(line)
            corpus[record["_id"]] = {"title": record.get("title") or "", "text": record["text"]}
    return Dataset(path.name, kind, corpus, queries, qrels)


def document_of(doc_id: str, record: dict[str, str], kind: str) -> Any:
    from context_ledger.sources.model import Document

    if kind == "codebase":
        return Document(f"{doc_id}.py", record["text"])
    title = record["title"]
    text = f"# {title}\n\n{record['text']}" if title else record["text"]
    return Document(f"{doc_id}.md", text)


def doc_id_of(path: str) -> str:
    return path.rsplit(".", 1)[0]


# --- organisation, ingest -----------------------------------------------------------------------


@dataclass(frozen=True)
class Tenant:
    admin: Any  # Principal
    caller: Any  # Principal
    space_id: uuid.UUID  # the project: retrieve searches it and its ancestors
    source_id: uuid.UUID
    version: int  # the published index version
    chunks: int
    ingest_seconds: float


def ingest(dataset: Dataset, embedder: Any, label: str) -> Tenant:
    """A fresh organisation > team > project, a source in the project holding the corpus (built
    in batches, then published), and a user who may search the team."""
    from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
    from context_ledger.db import connection
    from context_ledger.dlp.classification import Classification
    from context_ledger.sources import service
    from context_ledger.sources.model import SourceKind
    from context_ledger.spaces.levels import Level
    from context_ledger.spaces.permissions import Permission
    from context_ledger.spaces.service import create_organisation, create_space, set_grants

    with connection() as conn:
        org = create_organisation(conn, name=f"eval {dataset.name} {label}")
        admin = Principal(
            org_id=org.id,
            user_id="admin",
            client_id="eval",
            scopes=frozenset({SCOPE_CONTEXT_ADMIN}),
        )
        team = create_space(conn, admin, name="Evaluation", level=Level.TEAM, parent_id=None)
        project = create_space(
            conn, admin, name=dataset.name, level=Level.PROJECT, parent_id=team.id
        )
        set_grants(
            conn, admin, space_id=team.id, subject="user:reader", permissions=[Permission.SEARCH]
        )
        source = service.create_source(
            conn,
            admin,
            space_id=project.id,
            kind=SourceKind(dataset.kind),
            name=dataset.name,
            classification=Classification.INTERNAL,
        )
        version = service.open_build(conn, admin, source["id"])["version"]
    documents = [document_of(i, r, dataset.kind) for i, r in dataset.corpus.items()]
    started = time.perf_counter()
    with tqdm(total=len(documents), desc=f"ingest {dataset.name} ({label})", unit="doc") as bar:
        for start in range(0, len(documents), BATCH_DOCUMENTS):
            batch = documents[start : start + BATCH_DOCUMENTS]
            with connection() as conn:
                service.add_build_documents(
                    conn, admin, source["id"], version, batch, embedder=embedder
                )
            bar.update(len(batch))
    with connection() as conn:
        published = service.publish_build(conn, admin, source["id"], version)
    with connection() as conn:
        conn.autocommit = True
        conn.execute("ANALYZE chunks")
        conn.autocommit = False
    caller = Principal(
        org_id=org.id,
        user_id="reader",
        client_id="context-ledger-eval",
        scopes=frozenset({"context:space:search"}),
    )
    return Tenant(
        admin,
        caller,
        project.id,
        source["id"],
        version,
        published.counts.chunks,
        time.perf_counter() - started,
    )


# --- queries ------------------------------------------------------------------------------------


def recording_cache() -> Any:
    """A search cache that keeps every search step's candidates (the harness reads them)."""
    from context_ledger.retrieval.cache import CachedSearch, SearchCache

    class RecordingCache(SearchCache):
        def __init__(self) -> None:
            super().__init__()
            self.last: CachedSearch | None = None

        def get(self, key: Hashable) -> CachedSearch | None:
            return None  # every query searches

        def put(self, key: Hashable, value: CachedSearch) -> None:
            self.last = value

    return RecordingCache()


def ranked_run(paths: list[str], depth: int) -> dict[str, float]:
    """Distinct documents in the order of their first chunk, as a trec run (score by rank)."""
    order = list(dict.fromkeys(doc_id_of(path) for path in paths))[:depth]
    return {doc_id: float(depth - position) for position, doc_id in enumerate(order)}


def measure(
    dataset: Dataset, top: dict[str, dict[str, float]], deep: dict[str, dict[str, float]]
) -> dict[str, float]:
    """nDCG@10 and MRR@10 of the ``top`` runs, Recall@100 of the ``deep`` ones, averaged over
    every query of the dataset (a query without a run scores 0)."""
    import pytrec_eval

    top_scores = pytrec_eval.RelevanceEvaluator(
        dataset.qrels, {"ndcg_cut_10", "recip_rank"}
    ).evaluate(top)
    deep_scores = pytrec_eval.RelevanceEvaluator(dataset.qrels, {"recall_100"}).evaluate(deep)

    def mean(scores: dict[str, dict[str, float]], measure: str) -> float:
        return statistics.fmean(scores.get(q, {}).get(measure, 0.0) for q in dataset.queries)

    return {
        "ndcg_cut_10": mean(top_scores, "ndcg_cut_10"),
        "recall_100": mean(deep_scores, "recall_100"),
        "recip_rank": mean(top_scores, "recip_rank"),
    }


def query_words(dataset: Dataset) -> float:
    """The median length of the dataset's queries, in words (short claims against paragraphs)."""
    return statistics.median(len(text.split()) for text in dataset.queries.values())


def evaluate(
    dataset: Dataset,
    tenant: Tenant,
    embedder: Any,
    *,
    backend: str,
    config: str,
    candidates_out: TextIO | None = None,
) -> Result:
    """Every query through the use case; ``candidates_out`` gets each query's candidates (path,
    both scores, found by which search) as a JSON line, for analysis of ranking choices."""
    from context_ledger.db import connection
    from context_ledger.http.retrieve import RetrieveRequest
    from context_ledger.retrieval.query_vector import SearchMode
    from context_ledger.retrieval.service import Dependencies, retrieve
    from context_ledger.search.hybrid import rank
    from context_ledger.settings import load_settings
    from context_ledger.sources import store as sources_store

    cache = recording_cache()
    deps = Dependencies(
        # The model shares a loaded machine with the database: a query's vector may take
        # seconds, and an answer that fell back to full-text would not measure the hybrid.
        settings=load_settings(
            KEYSTONE_CONTEXT_SEARCH_BACKEND=backend,
            KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS=60,
            KEYSTONE_CONTEXT_EMBEDDINGS_COOLDOWN_SECONDS=0,
        ),
        cache=cache,
        embedder=embedder,
    )
    top: dict[str, dict[str, float]] = {}
    deep: dict[str, dict[str, float]] = {}
    seconds: list[float] = []
    short = 0
    for query_id, text in tqdm(
        dataset.queries.items(), desc=f"query {dataset.name} ({config})", unit="q"
    ):
        request = RetrieveRequest.model_validate(
            {
                "query": text,
                "spaceId": str(tenant.space_id),
                "tokenBudget": TOKEN_BUDGET,
                "maxPerLevel": MAX_PER_LEVEL,
                "excludeRelated": True,
            }
        ).to_query()
        cache.last = None
        with connection() as conn:
            started = time.perf_counter()
            answer = retrieve(conn, tenant.caller, request, client_header=None, deps=deps)
            seconds.append(time.perf_counter() - started)
            candidates = list(cache.last.candidates) if cache.last else []
            ordered = [r.candidate.chunk_id for r in rank(candidates, lambda c: 1.0)]
            rows = sources_store.chunks_by_id(
                conn,
                org_id=tenant.caller.org_id,
                ids=ordered,
                versions={c.source_id: c.index_version for c in candidates},
            )
        delivered = ranked_run([chunk.row["path"] for chunk in answer.chunks], 10)
        short += len(delivered) < 10
        if embedder is not None and answer.search_mode is not SearchMode.HYBRID:
            raise RuntimeError(f"query {query_id} was answered full-text only: no vector in time")
        top[query_id] = delivered
        deep[query_id] = ranked_run([rows[i]["path"] for i in ordered if i in rows], 100)
        if candidates_out is not None:
            found = [
                {
                    "path": rows[c.chunk_id]["path"],
                    "text": c.text_score,
                    "vector": c.vector_score,
                    "byText": c.found_by_text,
                    "byVector": c.found_by_vector,
                }
                for c in candidates
                if c.chunk_id in rows
            ]
            line = {"dataset": dataset.name, "config": config, "query": query_id, "found": found}
            candidates_out.write(json.dumps(line) + "\n")
    metrics = measure(dataset, top, deep)
    return Result(
        dataset=dataset.name,
        config=config,
        backend=backend,
        queries=len(dataset.queries),
        metrics=metrics,
        short_answers=short,
        query_ms_p50=statistics.median(seconds) * 1000,
        ingest_seconds=tenant.ingest_seconds,
        chunks=tenant.chunks,
    )


# --- embeddings providers -----------------------------------------------------------------------


@dataclass
class Embeddings:
    """A configuration's embeddings client (None for full-text) and, for the in-process MiniLM
    behind the harness's cache, that cache (its counters say what the model computed)."""

    client: Any
    cache: CachedEmbeddings | None = None
    model: str | None = None

    def counters(self) -> tuple[int, int, float]:
        """(texts the model embedded, texts served from the cache, model seconds) so far."""
        if self.cache is None:
            return 0, 0, 0.0
        return self.cache.misses, self.cache.hits, self.cache.model_seconds


@contextmanager
def embeddings_client(config: str, args: argparse.Namespace) -> Iterator[Embeddings]:
    """The embeddings of a configuration, their server running."""
    from context_ledger.embeddings.client import EmbeddingsClient
    from context_ledger.local.embeddings_server import serve_embeddings

    if config == "full-text":
        yield Embeddings(None)
        return
    if config == "hashing":
        with serve_embeddings(dims=HASHING_DIMENSIONS) as server:
            model = f"hashing-{HASHING_DIMENSIONS}"
            client = EmbeddingsClient(server.url, model, dimensions=HASHING_DIMENSIONS)
            yield Embeddings(client, model=model)
        return
    # A model on a shared 2-core machine can take long over a batch of abstracts.
    timeout = MODEL_TIMEOUT_SECONDS
    if args.embeddings_url:
        client = EmbeddingsClient(args.embeddings_url, args.embeddings_model, timeout=timeout)
        yield Embeddings(client, model=args.embeddings_model)
        return
    from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider
    from context_ledger.embeddings.serving import MiniLMService

    service: Any = MiniLMService(MiniLMEmbeddingProvider())
    cache = None
    if args.embeddings_cache is not None:
        service = cache = CachedEmbeddings(service, args.embeddings_model, args.embeddings_cache)
    with serve_embeddings(service=service) as server:
        client = EmbeddingsClient(server.url, args.embeddings_model, timeout=timeout)
        yield Embeddings(client, cache, args.embeddings_model)


# --- offline references (bench/reference.py) ---------------------------------------------------


def timed_orders(
    keys: Iterable[str], order_of: Callable[[str], list[int]]
) -> tuple[dict[str, list[int]], float]:
    """Each query's ranking and the median milliseconds one took."""
    orders: dict[str, list[int]] = {}
    seconds: list[float] = []
    for key in keys:
        started = time.perf_counter()
        orders[key] = order_of(key)
        seconds.append(time.perf_counter() - started)
    return orders, statistics.median(seconds) * 1000 if seconds else 0.0


def reference_result(
    dataset: Dataset,
    config: str,
    doc_ids: list[str],
    orders: dict[str, list[int]],
    query_ms: float,
    build_seconds: float,
    size: int,
    extra: dict[str, Any],
) -> Result:
    from reference import runs_of

    runs = runs_of(doc_ids, orders)
    return Result(
        dataset=dataset.name,
        config=config,
        backend=REFERENCE_BACKEND,
        queries=len(dataset.queries),
        metrics=measure(dataset, runs.top, runs.deep),
        short_answers=sum(len(runs.top[q]) < 10 for q in dataset.queries),
        query_ms_p50=query_ms,
        ingest_seconds=build_seconds,
        chunks=size,
        extra={"query_words": query_words(dataset), **extra},
    )


@dataclass
class Bm25Reference:
    doc_ids: list[str]
    index: Any  # reference.Bm25
    result: Result


def bm25_reference(dataset: Dataset) -> Bm25Reference:
    """bm25s over each document's text as the service ingests it (``document_of``)."""
    from reference import Bm25, bm25_order

    doc_ids = list(dataset.corpus)
    started = time.perf_counter()
    texts = [document_of(i, dataset.corpus[i], dataset.kind).content for i in doc_ids]
    index = Bm25(texts)
    built = time.perf_counter() - started
    orders, query_ms = timed_orders(
        dataset.queries, lambda q: bm25_order(index, dataset.queries[q])
    )
    result = reference_result(
        dataset,
        "bm25s",
        doc_ids,
        orders,
        query_ms,
        built,
        len(doc_ids),
        {"documents": len(doc_ids)},
    )
    return Bm25Reference(doc_ids, index, result)


_INDEXED_CHUNKS = """
SELECT c.path, c.tsv_tokens AS tokens,
       coalesce((SELECT jsonb_object_agg(lexeme, greatest(cardinality(positions), 1))
                 FROM unnest(c.tsv)), '{}'::jsonb) AS lexemes
FROM chunks c WHERE c.source_id = %s AND c.index_version = %s
"""


def index_bm25_reference(dataset: Dataset, tenant: Tenant, doc_ids: list[str]) -> Result:
    """``bm25-index`` (bench/reference.py): exhaustive BM25 over the tenant's index as stored,
    each query's lexemes and repeats counted by the service's own term statement on its
    redacted text, identical documents ranked once."""
    from reference import IndexBm25, IndexedChunk, delivered_once, ordered

    from context_ledger.db import connection
    from context_ledger.dlp.texts import redacted
    from context_ledger.retrieval.service import CANDIDATES
    from context_ledger.search.fulltext import pending_text_terms
    from context_ledger.search.query import SearchQuery

    started = time.perf_counter()
    position = {doc_id: n for n, doc_id in enumerate(doc_ids)}
    with connection() as conn:
        rows = conn.execute(_INDEXED_CHUNKS, (tenant.source_id, tenant.version)).fetchall()
        terms = {}
        for query_id, text in dataset.queries.items():
            search = SearchQuery(
                tenant.admin.org_id,
                [tenant.source_id],
                redacted((), text, stage="query"),
                None,
                CANDIDATES,
            )
            counts = pending_text_terms(conn, search).result()
            terms[query_id] = {lexeme: counts.repeats[lexeme] for lexeme in counts.operands}
    chunks = [
        IndexedChunk(position[doc_id_of(row["path"])], row["lexemes"], row["tokens"])
        for row in rows
    ]
    index = IndexBm25(chunks, len(doc_ids))
    texts = [document_of(i, dataset.corpus[i], dataset.kind).content for i in doc_ids]
    built = time.perf_counter() - started

    def order(query_id: str) -> list[int]:
        scores = index.scores(terms[query_id])
        return delivered_once(ordered(scores, len(doc_ids), floor=0.0), texts)[:100]

    orders, query_ms = timed_orders(dataset.queries, order)
    return reference_result(
        dataset,
        "bm25-index",
        doc_ids,
        orders,
        query_ms,
        built,
        len(chunks),
        {"documents": len(doc_ids)},
    )


def reference_vectors(
    dataset: Dataset, tenant: Tenant, embedder: Any, doc_ids: list[str]
) -> tuple[list[list[list[float]]], dict[str, list[float]]]:
    """Each document's chunk vectors and each query's vector, embedded through the DLP gate as
    the service embeds them (the chunks' stored texts, the query's text), so the embeddings
    cache serves what the ingest and the queries computed."""
    from context_ledger.db import connection
    from context_ledger.dlp.classification import Classification
    from context_ledger.dlp.gate import open_gate
    from context_ledger.settings import get_settings

    with connection() as conn:
        gate = open_gate(conn, org_id=tenant.admin.org_id, client=embedder, settings=get_settings())
        rows = conn.execute(
            "SELECT path, content FROM chunks WHERE source_id = %s AND index_version = %s"
            " ORDER BY path, ordinal",
            (tenant.source_id, tenant.version),
        ).fetchall()
    texts = [row["content"] for row in rows]
    vectors: list[list[float]] = []
    with tqdm(total=len(texts), desc=f"vectors {dataset.name}", unit="chunk") as bar:
        for start in range(0, len(texts), REFERENCE_BATCH):
            batch = texts[start : start + REFERENCE_BATCH]
            embedded = gate.embed_source_texts(classification=Classification.INTERNAL, texts=batch)
            if embedded is None:
                raise RuntimeError("the DLP gate sent no chunk of the source to be embedded")
            vectors.extend(embedded)
            bar.update(len(batch))
    by_document: dict[str, list[list[float]]] = {doc_id: [] for doc_id in doc_ids}
    for row, vector in zip(rows, vectors, strict=True):
        by_document[doc_id_of(row["path"])].append(vector)
    dims = len(vectors[0]) if vectors else 0
    queries: dict[str, list[float]] = {}
    for query_id, text in dataset.queries.items():
        vector = gate.embed_query_text(text, within=MODEL_TIMEOUT_SECONDS)
        queries[query_id] = vector if vector is not None else [0.0] * dims
    return [by_document[doc_id] for doc_id in doc_ids], queries


def vector_references(
    dataset: Dataset, tenant: Tenant, embeddings: Embeddings, provider: str, bm25: Bm25Reference
) -> list[Result]:
    """The dense and fusion reference rows of one embeddings configuration."""
    from reference import Dense, dense_order, fusion_order

    started = time.perf_counter()
    vectors, queries = reference_vectors(dataset, tenant, embeddings.client, bm25.doc_ids)
    dense = Dense.of(vectors)
    built = time.perf_counter() - started
    extra = {
        "model": embeddings.model,
        "dimensions": int(dense.matrix.shape[1]),
        "documents": len(bm25.doc_ids),
    }
    dense_name, fusion_name = reference_configs(provider)
    orders, ms = timed_orders(dataset.queries, lambda q: dense_order(dense, queries[q]))
    dense_row = reference_result(
        dataset, dense_name, bm25.doc_ids, orders, ms, built, len(dense.owner), extra
    )
    orders, ms = timed_orders(
        dataset.queries,
        lambda q: fusion_order(bm25.index, dense, dataset.queries[q], queries[q]),
    )
    fusion_row = reference_result(
        dataset, fusion_name, bm25.doc_ids, orders, ms, built, len(dense.owner), extra
    )
    return [dense_row, fusion_row]


# --- documents ----------------------------------------------------------------------------------


def update_documents(
    rows: list[dict[str, Any]],
    embeddings: Mapping[str, Any] | None,
    *,
    document: Path = REPO / "BENCHMARKS.md",
    page: Path = CRITERIA_PAGE,
    plots: Path = REPO / "docs" / "benchmarks",
) -> list[Path]:
    """BENCHMARKS.md's quality section and plot, and the criteria page's table, from ``rows``
    (all of quality.json): what ``make bench`` writes of them, without rerunning the suite."""
    from plots import quality_plot  # matplotlib: only when documents are written

    written = [quality_plot(rows, plots / "quality.png")]
    link = Path(os.path.relpath(plots, document.parent)).as_posix()
    document.write_text(
        replace_section(document.read_text(), "quality", quality_body(rows, embeddings, link))
    )
    page.write_text(
        replace_section(page.read_text(), CRITERIA_SECTION, criteria_section(rows, embeddings))
    )
    return [*written, document, page]


# --- the run ------------------------------------------------------------------------------------


def plan(configs: list[str]) -> list[tuple[str, list[str]]]:
    """Each build to ingest (an embeddings configuration, or ``full-text`` for a build without
    vectors) and the configurations measured on it. Full-text rows query the first build with
    vectors without an embeddings client (its stored vectors are then never read)."""
    providers = [c for c in ("hashing", "minilm") if c in configs]
    if not providers:
        return [("full-text", ["full-text"])] if "full-text" in configs else []
    builds = [(provider, [provider]) for provider in providers]
    if "full-text" in configs:
        builds[0][1].insert(0, "full-text")
    return builds


def report(result: Result) -> None:
    tqdm.write(HEADER)
    tqdm.write(result.line())


def run(args: argparse.Namespace, candidates_out: TextIO | None) -> list[Result]:
    results: list[Result] = []
    for path, kind in args.datasets:
        dataset = load_dataset(path, kind, args.split, args.quick)
        words = query_words(dataset)
        print(
            f"# {dataset.name}: {len(dataset.corpus):,} documents, {len(dataset.queries)} queries"
            f" ({args.split}, median {words:g} words)",
            flush=True,
        )
        bm25 = bm25_reference(dataset) if args.references else None
        indexed: list[Result] = []  # bm25-index, from the first build's index
        if bm25 is not None:
            results.append(bm25.result)
            report(bm25.result)
        for provider, configs in plan(args.configs):
            with embeddings_client(provider, args) as embeddings:
                before = embeddings.counters()
                tenant = ingest(dataset, embeddings.client, provider)
                if bm25 is not None and not indexed:
                    indexed.append(index_bm25_reference(dataset, tenant, bm25.doc_ids))
                    results.append(indexed[0])
                    report(indexed[0])
                after = embeddings.counters()
                embedded, cached, model_seconds = (
                    a - b for a, b in zip(after, before, strict=True)
                )
                print(
                    f"# {dataset.name} ({provider}): {tenant.chunks:,} chunks in"
                    f" {tenant.ingest_seconds:.1f} s"
                    + (
                        f"; the model embedded {embedded:,} texts in {model_seconds:.1f} s,"
                        f" {cached:,} came from the cache"
                        if embeddings.cache is not None
                        else ""
                    ),
                    flush=True,
                )
                for config in configs:
                    client = None if config == "full-text" else embeddings.client
                    result = evaluate(
                        dataset,
                        tenant,
                        client,
                        backend=args.backend,
                        config=config,
                        candidates_out=candidates_out,
                    )
                    result.extra["query_words"] = words
                    if client is not None:
                        result.extra["model"] = embeddings.model
                        if embeddings.cache is not None:
                            result.extra["ingest_embedded"] = int(embedded)
                            result.extra["ingest_cached"] = int(cached)
                            result.extra["ingest_model_seconds"] = round(model_seconds, 2)
                    results.append(result)
                    report(result)
                if bm25 is not None and provider != "full-text":
                    before = embeddings.counters()
                    for reference_row in vector_references(
                        dataset, tenant, embeddings, provider, bm25
                    ):
                        results.append(reference_row)
                        report(reference_row)
                    if embeddings.cache is not None:
                        embedded, cached, _ = (
                            a - b for a, b in zip(embeddings.counters(), before, strict=True)
                        )
                        tqdm.write(
                            f"# {dataset.name} references: {cached:,} vectors from the cache,"
                            f" {embedded:,} embedded by the model"
                        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "datasets",
        nargs="*",
        type=parse_dataset,
        default=[parse_dataset(d) for d in DEFAULT_DATASETS],
        help="PATH[:docs|codebase] of BEIR-format datasets, or the name of a default one"
        " (default: scifact docs, cosqa code, cacm docs, in the checkout's sibling folder"
        " shared/data)",
    )
    parser.add_argument(
        "--configs",
        type=lambda raw: [c.strip() for c in raw.split(",") if c.strip()],
        default=DEFAULT_CONFIGS,
        help=f"comma-separated, of {', '.join(CONFIGS)} (default: {','.join(DEFAULT_CONFIGS)})",
    )
    parser.add_argument(
        "--no-references",
        dest="references",
        action="store_false",
        help="skip the offline reference rows (bm25s; dense and fusion of each embeddings"
        " configuration) and the issue 27 table's offline columns",
    )
    parser.add_argument(
        "--no-document",
        action="store_true",
        help="leave BENCHMARKS.md, its quality plot and the docs page's quality table alone"
        " (a --quick run always does)",
    )
    parser.add_argument("--backend", choices=("exact", "pgvector"), default="exact")
    parser.add_argument("--split", default="test")
    parser.add_argument("--quick", type=int, metavar="N", help="only the first N queries")
    parser.add_argument("--embeddings-url", help="minilm: an OpenAI-compatible endpoint to use")
    parser.add_argument("--embeddings-model", default="all-MiniLM-L6-v2")
    parser.add_argument(
        "--embeddings-cache",
        type=Path,
        default=EMBEDDINGS_CACHE,
        help="minilm in-process: keep vectors in DIR/embeddings.sqlite3, keyed by model and text,"
        f" so a corpus is embedded once (default {EMBEDDINGS_CACHE})",
    )
    parser.add_argument(
        "--no-embeddings-cache",
        dest="embeddings_cache",
        action="store_const",
        const=None,
        help="minilm in-process: embed every text with the model",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--results",
        type=Path,
        default=QUALITY_RESULTS,
        help="merge the rows into this file, the newest row per dataset, configuration and"
        " backend (default bench/results/quality.json, which make bench's plots and"
        " BENCHMARKS.md read)",
    )
    parser.add_argument(
        "--candidates", type=Path, help="write each query's candidates here (JSON lines)"
    )
    args = parser.parse_args(argv)
    unknown = set(args.configs) - set(CONFIGS)
    if unknown or not args.configs:
        parser.error(f"--configs takes {', '.join(CONFIGS)}")
    os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    started = time.perf_counter()
    from ingest import scratch_database  # bench/ is the script's folder, first on sys.path

    with (
        scratch_database(),
        args.candidates.open("w") if args.candidates else nullcontext() as candidates_out,
    ):
        results = run(args, candidates_out)
    print()
    print(HEADER)
    for result in results:
        print(result.line())
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2) + "\n")
    from bench_support import git_revision

    measured = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git": git_revision(),
        "command": " ".join(["bench/quality.py", *(sys.argv[1:] if argv is None else argv)]),
        "query_limit": args.quick,
    }
    rows = [{**r.__dict__, "measured": measured} for r in results]
    print()
    print(criteria_section(rows, embeddings_bench()))
    record_quality([r.__dict__ for r in results], measured, args.results)
    if args.quick is None and not args.no_document:
        for path in update_documents(load_quality(args.results), embeddings_bench()):
            print(f"updated {path.relative_to(REPO)}")
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
