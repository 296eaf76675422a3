"""Could memory dedupe report near-duplicates by cosine? The cosines of hand-written pairs, per
embedder: restatements of one fact (a near-duplicate should match) against pairs that differ in
the one detail a memory exists to keep (a version, a number, a negation, a name: it must not).

A threshold is usable only if every restatement scores above every different fact. The figures
(docs/decisions.md, "Memory batch writes and dedupe") show it is not, for either embedder, so
dedupe matches normalised equal content only.

Run: ``.venv/bin/python bench/memory_near_duplicates.py`` (a few seconds).
"""

from __future__ import annotations

import numpy as np

from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider

#: The same fact said again: what a near-duplicate rule should catch.
RESTATED = [
    ("We use Postgres, not MongoDB.", "We chose Postgres rather than MongoDB."),
    ("Deploys happen on Tuesdays.", "We deploy every Tuesday."),
    ("The API answers in under 200 ms at p95.", "p95 latency of the API is below 200 ms."),
    (
        "Refunds above 500 EUR need two approvals.",
        "Two approvals are needed for refunds over 500 EUR.",
    ),
    ("Alice owns the billing service.", "The billing service is owned by Alice."),
    ("Use tabs, not spaces, in Go files.", "Go files are indented with tabs, not spaces."),
    ("The cache is flushed nightly.", "Every night the cache gets flushed."),
    ("Staging runs on eu-west-1.", "The staging environment is in eu-west-1."),
]

#: One detail apart: two memories, and merging them would lose one.
DIFFERENT = [
    ("We use Postgres 15.", "We use Postgres 16."),
    ("Deploys happen on Tuesdays.", "Deploys happen on Thursdays."),
    ("The API answers in under 200 ms at p95.", "The API answers in under 500 ms at p95."),
    ("Refunds above 500 EUR need two approvals.", "Refunds above 5000 EUR need two approvals."),
    ("Alice owns the billing service.", "Bob owns the billing service."),
    ("Use tabs in Go files.", "Do not use tabs in Go files."),
    ("The cache is flushed nightly.", "The cache is never flushed."),
    ("Staging runs on eu-west-1.", "Production runs on eu-west-1."),
]


def cosines(embed, pairs: list[tuple[str, str]]) -> np.ndarray:
    left = np.asarray(embed([a for a, _ in pairs]), dtype=np.float64)
    right = np.asarray(embed([b for _, b in pairs]), dtype=np.float64)
    left /= np.linalg.norm(left, axis=1, keepdims=True)
    right /= np.linalg.norm(right, axis=1, keepdims=True)
    return np.einsum("ij,ij->i", left, right)


def main() -> None:
    for provider in (HashingEmbeddingProvider(), MiniLMEmbeddingProvider()):
        same, other = cosines(provider.embed, RESTATED), cosines(provider.embed, DIFFERENT)
        print(f"{provider.name}:")
        print(f"  restated   min {same.min():.3f}  median {np.median(same):.3f}")
        print(f"  different  max {other.max():.3f}  median {np.median(other):.3f}")
        for threshold in (0.80, 0.85, 0.90, 0.95):
            caught = int((same >= threshold).sum())
            lost = int((other >= threshold).sum())
            print(
                f"  >= {threshold:.2f}: {caught}/{len(same)} restatements caught,"
                f" {lost}/{len(other)} different facts merged"
            )


if __name__ == "__main__":
    main()
