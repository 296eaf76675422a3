"""The pgvector backend's HNSW index: recall and latency against ``hnsw.ef_search``.

``KEYSTONE_CONTEXT_HNSW_EF_SEARCH`` trades recall for latency, and where the curve bends depends
on the vectors: the hashing stand-in's vectors (bags of hashed words, no semantic structure) are
much harder for a graph index than a language model's. This measures both on the same passages
so the default is chosen on the vectors a deployment embeds with, and the stand-in's cost is
known.

- Passages: the first ``--passages`` (default 100k) of ``bench/retrieve.py``'s corpus (windows of
  1-4 sentences of the SciFact abstracts, in its fixed order). Queries: SciFact claims.
- Vectors: ``hashing`` (the stand-in, 384 dimensions) and ``minilm`` (all-MiniLM-L6-v2, 384).
  MiniLM vectors are computed once and kept in ``~/.cache/context-ledger-eval/hnsw`` (keyed by
  the passages' digest): with the sentence-transformers reference interpreter
  (``--torch-python``, ``make .venv-torch/bin/python``; ~30 min for 100k on 2 cores) when it
  exists, else with the numpy runtime the embeddings function ships (slower; same vectors to
  ~1e-6, tests/unit/test_minilm_parity.py).
- Index: the one ``search/vectors.py`` builds (``hnsw`` on the ``halfvec`` cast with
  ``halfvec_cosine_ops``, pgvector's default ``m`` 16 and ``ef_construction`` 64), on a scratch
  table of ids and vectors.
- Search: the statement shape of ``search/pgvector_backend.py``: ``ORDER BY`` the half-precision
  distance, ``LIMIT 100`` (the search step's candidates), ``hnsw.iterative_scan =
  relaxed_order`` and ``hnsw.ef_search`` set for the transaction; hits re-sorted by their
  full-precision cosine, as the ranking sees them.
- Truth: exact cosine top 10 and top 100 (numpy, full precision). ``recall@10``: the share of the
  exact top 10 in the index's top 10; ``recall@100``: of the exact top 100 in its 100 hits.
- Latency: the statement alone on one connection (two rounds, the second timed), ms.

    .venv/bin/python bench/hnsw_recall.py                     # 100k passages, both vector kinds
    .venv/bin/python bench/hnsw_recall.py --passages 20000 --vectors hashing   # quick

Uses DATABASE_URL when set (on a scratch database it creates and drops), else embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm import tqdm

if TYPE_CHECKING:  # the torch worker's interpreter has neither psycopg nor the project's bench
    import psycopg

REPO = Path(__file__).resolve().parents[1]
CACHE = Path.home() / ".cache" / "context-ledger-eval" / "hnsw"
DIMENSIONS = 384
LIMIT = 100  # retrieval.service.CANDIDATES
EF_SEARCH = (40, 64, 100, 150, 200, 400)
BATCH = 2048


# --- vectors --------------------------------------------------------------------------------------


def _worker(texts_file: Path, out_file: Path) -> None:
    """sentence-transformers in the reference interpreter: unit vectors of the texts."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer

    from context_ledger.embeddings.minilm import packaged_model_dir

    model = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    texts = json.loads(texts_file.read_text(encoding="utf-8"))
    vectors = np.zeros((len(texts), DIMENSIONS), np.float32)
    for start in range(0, len(texts), BATCH):
        batch = texts[start : start + BATCH]
        vectors[start : start + len(batch)] = model.encode(batch, normalize_embeddings=True)
        print(f"{start + len(batch)}/{len(texts)}", file=sys.stderr, flush=True)
    np.save(out_file, vectors)


def _minilm(texts: list[str], torch_python: str) -> np.ndarray:
    if Path(torch_python).exists():
        with tempfile.TemporaryDirectory() as scratch:
            texts_file, out_file = Path(scratch) / "texts.json", Path(scratch) / "vectors.npy"
            texts_file.write_text(json.dumps(texts), encoding="utf-8")
            env = {**os.environ, "PYTHONPATH": str(REPO / "shared")}
            command = [torch_python, __file__, "--worker", str(texts_file), str(out_file)]
            if subprocess.run(command, env=env, check=False).returncode != 0:  # progress: stderr
                raise SystemExit(f"the MiniLM worker in {torch_python} failed (output above)")
            return np.load(out_file)
    from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider

    provider = MiniLMEmbeddingProvider()
    parts = [
        provider.encode(texts[start : start + 64])[0]
        for start in tqdm(range(0, len(texts), 64), desc="MiniLM (numpy)", unit="batch")
    ]
    return np.concatenate(parts).astype(np.float32)


def minilm_vectors(texts: list[str], torch_python: str) -> np.ndarray:
    """MiniLM vectors of ``texts``, from the cache when these texts were embedded before."""
    digest = hashlib.sha256("\0".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    path = CACHE / f"minilm-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    vectors = _minilm(texts, torch_python)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def hashing_vectors(texts: list[str]) -> np.ndarray:
    from context_ledger.embeddings.hashing import HashingEmbeddingProvider

    provider = HashingEmbeddingProvider(DIMENSIONS)
    parts = [
        np.asarray(provider.embed(texts[start : start + BATCH]), np.float32)
        for start in tqdm(range(0, len(texts), BATCH), desc="hashing", unit="batch")
    ]
    return np.concatenate(parts)


def unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


# --- the index ------------------------------------------------------------------------------------


def load_table(conn: psycopg.Connection, table: str, vectors: np.ndarray) -> float:
    """``table`` (id, embedding_vector) holding ``vectors`` and our HNSW index; build seconds."""
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, embedding_vector vector(384))")
    with conn.cursor().copy(
        f"COPY {table} (id, embedding_vector) FROM STDIN (FORMAT BINARY)"
    ) as copy:
        copy.set_types(["int4", "vector"])
        for index, vector in enumerate(tqdm(vectors, desc=f"load {table}", unit="row")):
            copy.write_row((index, vector))
    started = time.perf_counter()
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute(
        f"CREATE INDEX ON {table} USING hnsw"
        f" ((embedding_vector::halfvec({DIMENSIONS})) halfvec_cosine_ops)"
    )
    built = time.perf_counter() - started
    conn.execute(f"VACUUM ANALYZE {table}")
    return built


def search(conn: psycopg.Connection, table: str, query: np.ndarray, ef_search: int) -> list[int]:
    """The index's hits for ``query``, best first by full-precision cosine."""
    with conn.transaction():
        conn.execute(
            "SELECT set_config('hnsw.ef_search', %s, true),"
            " set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            (str(ef_search),),
        )
        rows = conn.execute(
            f"SELECT id, embedding_vector <=> %(q)s AS distance FROM {table}"
            f" ORDER BY embedding_vector::halfvec({DIMENSIONS}) <=> %(q)s::halfvec({DIMENSIONS})"
            " LIMIT %(limit)s",
            {"q": query, "limit": LIMIT},
        ).fetchall()
    return [row[0] for row in sorted(rows, key=lambda row: row[1])]


def measure(
    conn: psycopg.Connection, table: str, queries: np.ndarray, truth: np.ndarray, ef: int
) -> dict[str, float]:
    seconds: list[float] = []
    at_10: list[float] = []
    at_100: list[float] = []
    for timed in (False, True):
        for query, exact in zip(queries, truth, strict=True):
            started = time.perf_counter()
            hits = search(conn, table, query, ef)
            if timed:
                seconds.append(time.perf_counter() - started)
                at_10.append(len(set(hits[:10]) & set(exact[:10])) / 10)
                at_100.append(len(set(hits) & set(exact)) / LIMIT)
    seconds.sort()
    return {
        "recall_at_10": statistics.fmean(at_10),
        "recall_at_100": statistics.fmean(at_100),
        "p50_ms": seconds[len(seconds) // 2] * 1000,
        "p95_ms": seconds[int(len(seconds) * 0.95)] * 1000,
    }


# --- the driver -----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--vectors", default="minilm,hashing", help="minilm, hashing or both")
    parser.add_argument("--ef", default=",".join(map(str, EF_SEARCH)), help="ef_search values")
    parser.add_argument(
        "--torch-python",
        default=os.environ.get("BENCH_TORCH_PYTHON", str(REPO / ".venv-torch" / "bin" / "python")),
        help="an interpreter with sentence-transformers (else the numpy runtime embeds)",
    )
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(Path(args.worker[0]), Path(args.worker[1]))
        return 0

    import psycopg
    from bench_support import git_revision, load_queries, write_results
    from ingest import scratch_database
    from retrieve import DATA, corpus_passages

    texts = [p.content for p in corpus_passages(DATA / "corpus.jsonl")[: args.passages]]
    claims = load_queries(DATA / "queries.jsonl", args.queries)
    efs = [int(ef) for ef in args.ef.split(",")]
    rows: list[dict[str, Any]] = []
    with scratch_database() as url, psycopg.connect(url, autocommit=True) as conn:
        for kind in args.vectors.split(","):
            if kind == "minilm":
                both = minilm_vectors(texts + claims, args.torch_python)
            else:
                both = hashing_vectors(texts + claims)
            both = unit(both)
            passages, queries = both[: len(texts)], both[len(texts) :]
            truth = np.argsort(-(queries @ passages.T), axis=1)[:, :LIMIT]
            built = load_table(conn, f"hnsw_{kind}", passages)
            print(f"\n{kind}: {len(texts):,} passages, index built in {built:.0f} s")
            for ef in efs:
                row = {
                    "vectors": kind,
                    "ef_search": ef,
                    **measure(conn, f"hnsw_{kind}", queries, truth, ef),
                }
                rows.append(row)
                print(
                    f"  ef_search {ef:>4}: recall@10 {row['recall_at_10']:.3f}"
                    f"  recall@100 {row['recall_at_100']:.3f}"
                    f"  p50 {row['p50_ms']:6.2f} ms  p95 {row['p95_ms']:6.2f} ms",
                    flush=True,
                )
    measured = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "git": git_revision(),
        "command": " ".join(["bench/hnsw_recall.py", *sys.argv[1:]]),
    }
    figures = {"passages": len(texts), "queries": len(claims), "rows": rows, "measured": measured}
    write_results(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
