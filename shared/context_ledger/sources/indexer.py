"""Index builds: documents in, chunks (with full-text vectors and embeddings) and code edges out.

A build is an index version in state ``building``. Batches of documents are chunked, embedded
through the DLP gate and bulk-loaded; a document path sent again in the same build replaces its
earlier chunks, so a retried batch is harmless. Publishing computes the code graph over the whole
snapshot and flips ``sources.index_version`` in one transaction: searches see either the old
version or the new one, never a mix, and never an unpublished build.

The full-text index holds redacted text (:func:`_search_texts`): the ``tsvector`` of a chunk is
built from its content, symbol and language redacted with the organisation's rules, so searching
for a redacted value (a password, an email) finds exactly what searching for a wrong guess finds,
and cannot confirm it. This holds whatever the source's action, ``allow`` included, as for the
text sent to an embeddings endpoint: the index and the vectors see the same text, and a policy
moving a source from ``allow`` to ``redact`` needs no rebuild to protect it. The stored content
stays as uploaded: delivery redacts it with the rules of the day (``dlp/delivery.py``). Rules
changed after a build (a new custom pattern) reach the index on the source's next build; until
then delivery and the query's redaction apply them. A scan failure indexes nothing of the batch
(503, the transaction rolls back).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from context_ledger.dlp.classification import Classification
from context_ledger.dlp.gate import EmbeddingGate
from context_ledger.dlp.redaction import CustomPattern
from context_ledger.dlp.texts import redacted
from context_ledger.sources import store
from context_ledger.sources.chunking import chunk_document
from context_ledger.sources.chunking.identifiers import search_text
from context_ledger.sources.code_graph import build_code_graph, graph_language
from context_ledger.sources.model import Chunk, Document, SourceKind


@dataclass(frozen=True)
class BuildTarget:
    """Where a batch goes: a source (with what the gate needs to know) and its open build."""

    org_id: uuid.UUID
    source_id: uuid.UUID
    kind: SourceKind
    classification: Classification
    version: int
    #: the version searches serve now; its embeddings are reused for unchanged chunks
    published_version: int


@dataclass(frozen=True)
class BatchStats:
    documents: int
    chunks: int
    tokens: int
    embedded: int
    reused_embeddings: int
    seconds: float


@dataclass(frozen=True)
class BuildCounts:
    documents: int
    chunks: int
    tokens: int
    embedded: int
    edges: int


def _chunks_of(documents: Sequence[Document], kind: SourceKind) -> list[tuple[int, Chunk]]:
    """Chunks of every document with their ordinal within the document."""
    out: list[tuple[int, Chunk]] = []
    for document in documents:
        out.extend(enumerate(chunk_document(document, kind=kind)))
    return out


def _search_texts(chunks: Sequence[Chunk], patterns: tuple[CustomPattern, ...]) -> list[str]:
    """What full-text search indexes of each chunk: its words (for code, also the parts of its
    identifiers and the words of its symbol) once its content, symbol and language are redacted.

    Built from the redacted texts, not redacted after: the identifier parts of a secret
    (``Tr0ub4dorXyzzy77`` → tr0, ub4, dor, xyzzy77) are no finding of any detector and would
    stay searchable."""

    def redact(text: str) -> str:
        return redacted(patterns, text, stage="indexing")

    languages: dict[str | None, str | None] = {None: None}  # a batch has a handful
    texts = []
    for chunk in chunks:
        if chunk.language not in languages:
            languages[chunk.language] = redact(chunk.language)
        texts.append(
            search_text(
                redact(chunk.content),
                code=chunk.code,
                language=languages[chunk.language],
                symbol=redact(chunk.symbol) if chunk.symbol else None,
            )
        )
    return texts


def _embeddings(
    conn: psycopg.Connection,
    target: BuildTarget,
    chunks: list[Chunk],
    gate: EmbeddingGate,
) -> tuple[list[list[float] | None], int]:
    """One embedding (or None) per chunk: reused by content hash where possible, else embedded
    through the DLP gate. Returns the vectors and how many were reused.

    Nothing is reused for a source the gate refuses now: its chunks become full-text only, even
    where an earlier policy let them be embedded."""
    if gate.client is None or not chunks:
        return [None] * len(chunks), 0
    reused: dict[bytes, list[float]] = {}
    if target.published_version:
        reused = store.embeddings_by_content(
            conn,
            source_id=target.source_id,
            hashes=list({c.content_sha256 for c in chunks}),
            model=gate.client.model,
            version=target.published_version,
        )
    missing = [i for i, c in enumerate(chunks) if c.content_sha256 not in reused]
    fresh = gate.embed_source_texts(
        classification=target.classification, texts=[chunks[i].content for i in missing]
    )
    if fresh is None:  # the gate sent nothing: the source is full-text only
        return [None] * len(chunks), 0
    vectors: list[list[float] | None] = [reused.get(c.content_sha256) for c in chunks]
    for index, vector in zip(missing, fresh, strict=True):
        vectors[index] = vector
    return vectors, len(chunks) - len(missing)


def add_documents(
    conn: psycopg.Connection,
    target: BuildTarget,
    documents: Sequence[Document],
    *,
    gate: EmbeddingGate,
) -> BatchStats:
    """Chunk, embed and load a batch into the open build (in the caller's transaction)."""
    started = time.perf_counter()
    numbered = _chunks_of(documents, target.kind)
    chunks = [chunk for _, chunk in numbered]
    search_texts = _search_texts(chunks, gate.policy.patterns)
    vectors, reused = _embeddings(conn, target, chunks, gate)
    store.replace_build_chunks(
        conn,
        org_id=target.org_id,
        source_id=target.source_id,
        version=target.version,
        paths=sorted({d.path for d in documents}),
        chunks=[
            store.NewChunk(
                path=chunk.path,
                ordinal=ordinal,
                content=chunk.content,
                content_sha256=chunk.content_sha256,
                token_count=chunk.token_count,
                search_text=text,
                embedding=vector,
                metadata=chunk.metadata,
                language=chunk.language,
                symbol=chunk.symbol,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
            )
            for (ordinal, chunk), text, vector in zip(numbered, search_texts, vectors, strict=True)
        ],
        model=gate.model,
    )
    for document in documents:
        language = graph_language(document)
        if language is not None:
            store.store_graph_document(
                conn,
                source_id=target.source_id,
                version=target.version,
                path=document.path,
                language=language,
                content=document.content,
            )
    return BatchStats(
        documents=len(documents),
        chunks=len(chunks),
        tokens=sum(c.token_count for c in chunks),
        embedded=sum(v is not None for v in vectors),
        reused_embeddings=reused,
        seconds=time.perf_counter() - started,
    )


def _chunk_of(
    chunk_ids: dict[tuple[str, str], uuid.UUID], path: str, symbol: str
) -> uuid.UUID | None:
    """The chunk holding ``symbol``: its own, or its enclosing one's (a small class is a single
    chunk, so ``Class.method`` lives in the ``Class`` chunk)."""
    while True:
        found = chunk_ids.get((path, symbol))
        if found is not None or "." not in symbol:
            return found
        symbol = symbol.rsplit(".", 1)[0]


def link_code_graph(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> int:
    """Compute the build's code graph from its stored documents and store the edges."""
    documents = [
        Document(path=row["path"], content=row["content"], language=row["language"])
        for row in store.graph_documents(conn, source_id=source_id, version=version)
    ]
    if not documents:
        return 0
    symbols = store.symbol_chunks(conn, source_id=source_id, version=version)
    chunk_ids = {(row["path"], row["symbol"]): row["id"] for row in symbols}
    edges = []
    for edge in build_code_graph(documents):
        from_id = _chunk_of(chunk_ids, edge.from_path, edge.from_symbol)
        to_id = _chunk_of(chunk_ids, edge.to_path, edge.to_symbol)
        if from_id and to_id and from_id != to_id:
            edges.append((from_id, to_id, edge.relation.value))
    store.insert_edges(conn, source_id=source_id, version=version, edges=edges)
    store.drop_graph_documents(conn, source_id=source_id, version=version)
    return len(set(edges))


def finish_build(conn: psycopg.Connection, *, source_id: uuid.UUID, version: int) -> BuildCounts:
    """Link the code graph and record the build's counts (before it is published)."""
    edges = link_code_graph(conn, source_id=source_id, version=version)
    row = store.record_build_counts(conn, source_id=source_id, version=version)
    return BuildCounts(
        documents=row["documents"],
        chunks=row["chunks"],
        tokens=row["tokens"],
        embedded=row["embedded"],
        edges=edges,
    )
