"""Write the reference vectors the MiniLM parity test compares against (tests/fixtures/embeddings).

Run with the torch reference venv (``make .venv-torch/bin/python``):
``.venv-torch/bin/python bench/make_minilm_reference.py``. It encodes a few texts with
sentence-transformers from the packaged weights and stores them, so the test suite checks our
numpy runtime against the reference without installing torch.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from context_ledger.embeddings.minilm import packaged_model_dir  # noqa: E402

TEXTS = [
    "which database did we pick for the ranking query",
    "déjà vu at the Überseering café 東京 🎉",
    "def add(a, b): return a + b" * 30,
    "Refunds above 500 EUR need a second approver.",
    "",
]
OUT = ROOT / "tests" / "fixtures" / "embeddings" / "minilm_reference.json"


def main() -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(packaged_model_dir()), device="cpu")
    vectors = model.encode(TEXTS, normalize_embeddings=True)
    OUT.write_text(
        json.dumps(
            {
                "model": "all-MiniLM-L6-v2 (sentence-transformers, normalize_embeddings=True)",
                "texts": TEXTS,
                "vectors": [[round(float(x), 7) for x in v] for v in vectors],
            }
        )
        + "\n"
    )
    print(f"wrote {len(TEXTS)} reference vectors to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
