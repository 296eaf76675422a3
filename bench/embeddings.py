"""all-MiniLM-L6-v2 runtimes compared: cold start, peak memory, embeddings/s, agreement.

Each runtime runs in a fresh process, as a cold Lambda would, on the same texts (SciFact
abstracts, title + text, most longer than the model's 256-token window; and their titles alone,
query-sized), all pinned to the same cores:

- ``numpy``: ``context_ledger.embeddings.minilm`` (numpy + tokenizers + the packaged weights), the
  runtime the embeddings function ships, on one BLAS thread as deployed and on OpenBLAS's default;
- ``torch``: sentence-transformers on CPU torch, the reference, on one thread and on its default,
  from another interpreter (``--torch-python``; ``make bench-embeddings`` builds ``.venv-torch``
  with torch==2.13.0, the CPU build on this machine's disk) so the project's environment stays
  torch-free;
- ``hashing``: the model-free provider at 384 dimensions, the floor.

Cold start is the wall time from spawning the process to the first vector (interpreter start,
imports, weights, one text). Peak RSS is the process's maximum resident set after all texts.
Agreement is the cosine between the numpy and torch vectors of every text (both are unit length).

    .venv/bin/python bench/embeddings.py [--docs 512] [--torch-python .venv-torch/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DOCS = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
BATCH_SIZE = 32  # sentence-transformers' default; the numpy runtime batches by tokens


def _load_texts(path: Path, limit: int) -> tuple[list[str], list[str]]:
    docs, titles = [], []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if len(docs) == limit:
                break
            record = json.loads(line)
            docs.append(f"{record['title']}\n{record['text']}")
            titles.append(record["title"])
    return docs, titles


# --- the worker: one runtime, in its own process -----------------------------------------------


def _worker(runtime: str, texts_file: Path, out_file: Path) -> None:
    import numpy as np

    texts = json.loads(texts_file.read_text(encoding="utf-8"))
    if runtime == "numpy":
        from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider

        provider = MiniLMEmbeddingProvider()

        def embed(batch: list[str]) -> np.ndarray:
            return provider.encode(batch)[0]

    elif runtime == "torch":
        os.environ["HF_HUB_OFFLINE"] = "1"
        from sentence_transformers import SentenceTransformer

        from context_ledger.embeddings.minilm import packaged_model_dir

        model = SentenceTransformer(str(packaged_model_dir()), device="cpu")

        def embed(batch: list[str]) -> np.ndarray:
            return model.encode(batch, batch_size=BATCH_SIZE, normalize_embeddings=True)

    else:
        from context_ledger.embeddings.hashing import HashingEmbeddingProvider

        hashing = HashingEmbeddingProvider(384)

        def embed(batch: list[str]) -> np.ndarray:
            return np.asarray(hashing.embed(batch), dtype=np.float32)

    embed(texts["docs"][:1])
    print(json.dumps({"ready": time.time()}), flush=True)
    figures = {}
    vectors = []
    for kind in ("docs", "titles"):
        started = time.perf_counter()
        vectors.append(embed(texts[kind]))
        figures[f"{kind}_per_s"] = len(texts[kind]) / (time.perf_counter() - started)
    np.save(out_file, np.concatenate(vectors))
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures), flush=True)


# --- the driver ----------------------------------------------------------------------------------


#: Rows: (worker, interpreter: "self" or "torch", extra environment). ``numpy 1 thread`` is the
#: function as deployed (template.yaml sets OPENBLAS_NUM_THREADS=1 on it).
ROWS: dict[str, tuple[str, str, dict[str, str]]] = {
    "hashing": ("hashing", "self", {}),
    "numpy 1 thread": ("numpy", "self", {"OPENBLAS_NUM_THREADS": "1"}),
    "numpy": ("numpy", "self", {}),
    "torch 1 thread": ("torch", "torch", {"OMP_NUM_THREADS": "1"}),
    "torch": ("torch", "torch", {}),
}


def _run(
    runtime: str, python: str, extra_env: dict[str, str], texts_file: Path, out_file: Path
) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "shared"), **extra_env}
    command = [python, __file__, "--worker", runtime, str(texts_file), str(out_file)]
    spawned = time.time()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{runtime} worker failed:\n{result.stderr[-2000:]}")
    ready, figures = (json.loads(line) for line in result.stdout.splitlines()[-2:])
    return {"cold_start_s": ready["ready"] - spawned, **figures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=512, help="SciFact abstracts to embed")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_DOCS)
    parser.add_argument(
        "--torch-python",
        default=os.environ.get("BENCH_TORCH_PYTHON", str(REPO / ".venv-torch" / "bin" / "python")),
        help="an interpreter with sentence-transformers and torch (skipped if missing)",
    )
    parser.add_argument(
        "--no-torch", action="store_true", help="the numpy and hashing rows only (make bench)"
    )
    parser.add_argument("--json", type=Path, help="also write the rows here (bench/suite.py)")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker[0], Path(args.worker[1]), Path(args.worker[2]))
        return 0

    import numpy as np
    from bench_support import write_results  # not at the top: workers' cold starts import none

    docs, titles = _load_texts(args.corpus, args.docs)
    pythons = {"self": sys.executable}
    if args.no_torch:
        print("(torch rows skipped: --no-torch)")
    elif Path(args.torch_python).exists():
        pythons["torch"] = args.torch_python
    else:
        print(f"(torch rows skipped: no {args.torch_python}; `make bench-embeddings` builds it)")
    rows: dict[str, dict[str, float]] = {}
    vectors: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as scratch:
        texts_file = Path(scratch) / "texts.json"
        texts_file.write_text(json.dumps({"docs": docs, "titles": titles}), encoding="utf-8")
        for name, (runtime, interpreter, extra_env) in ROWS.items():
            if interpreter not in pythons:
                continue
            out_file = Path(scratch) / f"{runtime}.npy"
            rows[name] = _run(runtime, pythons[interpreter], extra_env, texts_file, out_file)
            vectors[runtime] = np.load(out_file)

    print(f"\n{len(docs)} SciFact abstracts (truncated at 256 tokens) and their titles;")
    print(f"{os.cpu_count()} cores; each runtime in a fresh process\n")
    header = f"{'runtime':<16}{'cold start s':>14}{'peak RSS MB':>13}{'docs/s':>10}{'titles/s':>10}"
    print(header)
    print("-" * len(header))
    for runtime, row in rows.items():
        print(
            f"{runtime:<16}{row['cold_start_s']:>14.2f}{row['peak_rss_mb']:>13.0f}"
            f"{row['docs_per_s']:>10.1f}{row['titles_per_s']:>10.1f}"
        )
    agreement = None
    if "torch" in vectors:
        cosines = (vectors["numpy"] * vectors["torch"]).sum(axis=1)
        agreement = {"cosine_min": float(cosines.min()), "cosine_mean": float(cosines.mean())}
        print(
            f"\nnumpy vs torch, {len(cosines)} texts: cosine min {cosines.min():.7f}, "
            f"mean {cosines.mean():.7f}; max |difference| "
            f"{np.abs(vectors['numpy'] - vectors['torch']).max():.2e}"
        )
    write_results(args.json, {"docs": len(docs), "rows": rows, "agreement": agreement})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
