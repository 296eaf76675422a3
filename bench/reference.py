"""Offline reference rankings for the quality harness (bench/quality.py), from the same dataset in
the same run: what issue 27 measures the API's rankings against.

- ``bm25s``: exhaustive BM25 over every document (Lucene's idf and length normalisation, k1 1.2,
  b 0.75, query terms counted with their repeats), tokenised by bm25s with its English stop words
  and the Snowball English stemmer (PyStemmer), over each document's text as the service ingests
  it (the ``# title`` heading and the text of a docs source, the code of a codebase source);
- ``bm25-index``: the same BM25, exhaustive, over the service's own index instead of bm25s's
  tokens: each chunk's lexemes and length as its stored tsvector holds them, the query's lexemes
  and repeats as the service counts them, a document scoring its best chunk, and identical
  document texts ranked once, as an answer delivers a text once. What full-text search loses to
  its matching bound (the rarest terms only) shows against this one; what PostgreSQL's parser,
  stemmer and stop words cost against bm25s's, in the difference between the two references;
- ``dense``: cosine of the query's vector with every document's, exhaustively; a document the
  service cut into several chunks scores its best chunk (its vectors are the chunks' texts as the
  service embeds them, so the harness's embeddings cache serves them);
- ``fusion``: ``0.7 * cos + 0.3 * bm25 / max bm25`` per query (the max over the corpus, i.e. the
  best document's), over the union of each side's top 100, ranked by score alone (no tiers).

Pure: no database and no model; the harness gives texts and vectors in, ranked runs come out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

K1 = 1.2
B = 0.75
VECTOR_WEIGHT = 0.7
TEXT_WEIGHT = 0.3
FUSION_DEPTH = 100  # each side's top documents the fusion ranks
#: The backend of the reference rows in quality.json: no service search.
REFERENCE_BACKEND = "offline"


def reference_configs(provider: str) -> tuple[str, str]:
    """The dense and fusion reference rows of an embeddings configuration: ``dense`` and
    ``fusion`` for MiniLM (issue 27's), ``dense-<config>`` and ``fusion-<config>`` otherwise."""
    if provider == "minilm":
        return "dense", "fusion"
    return f"dense-{provider}", f"fusion-{provider}"


def ordered(scores: np.ndarray, depth: int, *, floor: float | None = None) -> list[int]:
    """Indices of the ``depth`` highest ``scores``, highest first, ties in index order; with
    ``floor``, only scores above it."""
    order = np.lexsort((np.arange(len(scores)), -scores))[:depth]
    if floor is not None:
        order = order[scores[order] > floor]
    return [int(i) for i in order]


def as_run(doc_ids: Sequence[str], order: Sequence[int]) -> dict[str, float]:
    """A ranked list of document indices as a trec run (score by rank, as the harness scores
    the API's answers)."""
    return {doc_ids[i]: float(len(order) - position) for position, i in enumerate(order)}


class Bm25:
    """bm25s over the documents, with the Snowball English stemmer and English stop words."""

    def __init__(self, texts: Sequence[str], *, k1: float = K1, b: float = B) -> None:
        import bm25s
        import Stemmer

        self._bm25s = bm25s
        self._stemmer = Stemmer.Stemmer("english")
        self.size = len(texts)
        tokens = bm25s.tokenize(
            list(texts), stopwords="en", stemmer=self._stemmer, show_progress=False
        )
        self._index = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._index.index(tokens, show_progress=False)

    def tokens(self, query: str) -> list[str]:
        """The query's terms as the index holds them, repeats kept (each one counts)."""
        return self._bm25s.tokenize(
            [query],
            stopwords="en",
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )[0]

    def scores(self, query: str) -> np.ndarray:
        """Every document's BM25 score for ``query`` (zero where no term matches)."""
        ids = self._index.get_tokens_ids(self.tokens(query))
        if not ids:
            return np.zeros(self.size, dtype=np.float64)
        return np.asarray(self._index.get_scores_from_ids(ids), dtype=np.float64)


@dataclass(frozen=True)
class Dense:
    """Each document's vectors (one per chunk), L2-normalised, and which document each belongs to.
    A document without a vector scores -inf and is never ranked by it."""

    matrix: np.ndarray  # (vectors, dimensions)
    owner: np.ndarray  # (vectors,) index of the document each vector belongs to
    documents: int

    @classmethod
    def of(cls, vectors: Sequence[Sequence[Sequence[float]]]) -> Dense:
        """``vectors[i]``: the vectors of document ``i`` (its chunks'), possibly none."""
        rows = [v for document in vectors for v in document]
        owner = [i for i, document in enumerate(vectors) for _ in document]
        dims = len(rows[0]) if rows else 0
        matrix = np.asarray(rows, dtype=np.float64).reshape(len(rows), dims)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
        return cls(matrix, np.asarray(owner, dtype=np.int64), len(vectors))

    def scores(self, query: Sequence[float]) -> np.ndarray:
        """Every document's cosine with ``query``: its best vector's."""
        q = np.asarray(query, dtype=np.float64)
        norm = np.linalg.norm(q)
        cosines = self.matrix @ (q / norm if norm else q)
        best = np.full(self.documents, -np.inf)
        np.maximum.at(best, self.owner, cosines)
        return best


def fuse(
    cosines: np.ndarray, bm25: np.ndarray, *, depth: int = FUSION_DEPTH
) -> tuple[list[int], dict[int, float]]:
    """The fusion's ranking: the union of the top ``depth`` documents by cosine and by BM25 (a
    document no term matches is not among the latter), each scored ``0.7 * cos + 0.3 * bm25 /
    max bm25`` (text part 0 when nothing matches; vector part 0 for a document without a vector),
    highest first, ties in index order. Returns the order and each ranked document's score."""
    by_vector = ordered(cosines, depth, floor=-np.inf)
    by_text = ordered(bm25, depth, floor=0.0)
    top = float(bm25.max()) if len(bm25) else 0.0
    union = sorted(set(by_vector) | set(by_text))
    scores = {
        i: VECTOR_WEIGHT * (float(cosines[i]) if np.isfinite(cosines[i]) else 0.0)
        + (TEXT_WEIGHT * float(bm25[i]) / top if top > 0 else 0.0)
        for i in union
    }
    order = sorted(union, key=lambda i: (-scores[i], i))
    return order, scores


@dataclass(frozen=True)
class Runs:
    """The reference runs of one dataset: query id → (document id → score by rank)."""

    top: dict[str, dict[str, float]]  # the first 10 (nDCG@10, MRR@10)
    deep: dict[str, dict[str, float]]  # the first 100 (Recall@100)


def runs_of(doc_ids: Sequence[str], orders: Mapping[str, Sequence[int]]) -> Runs:
    return Runs(
        top={q: as_run(doc_ids, order[:10]) for q, order in orders.items()},
        deep={q: as_run(doc_ids, order[:100]) for q, order in orders.items()},
    )


@dataclass(frozen=True)
class IndexedChunk:
    """A chunk as the service's full-text index holds it."""

    document: int  # its document's index
    lexemes: Mapping[str, int]  # lexeme -> occurrences (its positions in the tsvector)
    tokens: int  # its length (``chunks.tsv_tokens``)


class IndexBm25:
    """BM25 over the service's index (``bm25-index`` above): every chunk holding a query term
    scored, the chunk statistics (count, mean length, document frequencies) those of the chunks
    given, as the service counts them over a source's version."""

    def __init__(
        self, chunks: Sequence[IndexedChunk], documents: int, *, k1: float = K1, b: float = B
    ) -> None:
        self.size = documents
        self._k1, self._b = k1, b
        self._owner = np.array([c.document for c in chunks], dtype=np.int64)
        lengths = np.array([c.tokens for c in chunks], dtype=np.float64)
        self._norm = (
            k1 * (1 - b + b * lengths / max(float(lengths.mean()), 1.0)) if len(chunks) else lengths
        )
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for n, chunk in enumerate(chunks):
            for lexeme, tf in chunk.lexemes.items():
                ids, tfs = postings.setdefault(lexeme, ([], []))
                ids.append(n)
                tfs.append(tf)
        self._postings = {
            lexeme: (np.array(ids), np.array(tfs, dtype=np.float64))
            for lexeme, (ids, tfs) in postings.items()
        }

    def scores(self, terms: Mapping[str, int]) -> np.ndarray:
        """Every document's BM25 score for the query ``terms`` (lexeme -> repeats in the
        query), its best chunk's; zero where no term matches."""
        chunk_scores = np.zeros(len(self._owner), dtype=np.float64)
        for lexeme, repeats in terms.items():
            if lexeme not in self._postings:
                continue
            ids, tfs = self._postings[lexeme]
            idf = np.log(1 + (len(self._owner) - len(ids) + 0.5) / (len(ids) + 0.5))
            chunk_scores[ids] += repeats * idf * tfs * (self._k1 + 1) / (tfs + self._norm[ids])
        documents = np.zeros(self.size, dtype=np.float64)
        np.maximum.at(documents, self._owner, chunk_scores)
        return documents


def delivered_once(order: Sequence[int], texts: Sequence[str]) -> list[int]:
    """``order`` without a document whose text an earlier one already has: an answer
    delivers a text once, so of identical documents only the first can be in it."""
    seen: set[str] = set()
    kept = []
    for i in order:
        if texts[i] not in seen:
            seen.add(texts[i])
            kept.append(i)
    return kept


def bm25_order(index: Bm25, query: str, depth: int = 100) -> list[int]:
    """The query's documents by BM25, those some term matches, at most ``depth``."""
    return ordered(index.scores(query), depth, floor=0.0)


def dense_order(dense: Dense, vector: Sequence[float], depth: int = 100) -> list[int]:
    """The documents by cosine with the query's vector (those with a vector), at most ``depth``."""
    return ordered(dense.scores(vector), depth, floor=-np.inf)


def fusion_order(
    index: Bm25, dense: Dense, query: str, vector: Sequence[float], depth: int = 100
) -> list[int]:
    """The fusion's ranking of the query (:func:`fuse`), at most ``depth``."""
    return fuse(dense.scores(vector), index.scores(query))[0][:depth]
