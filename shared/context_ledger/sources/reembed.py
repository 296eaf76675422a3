"""Re-embedding sources after the embeddings model changes (``context-ledger source reembed``).

Vector search compares a query's vector with the chunks of the same dimension only
(``search/exact.py``), not of the same model: after ``KEYSTONE_CONTEXT_EMBEDDINGS_MODEL`` moves
from one model to another of the same size (the hashing stand-in's 384 to MiniLM's 384), the old
vectors would be ranked against the new model's queries as if they meant something, and a
model of another size leaves the old chunks out of vector search altogether. This module brings
the chunks of each source's **published** index version to the configured model:

- a chunk is *stale* when it has no embedding, or one stored under another model name, or (with
  ``KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS`` set) of another dimension;
- a source the DLP gate refuses now (``drop``, ``block_source``, or a protected class and an
  external endpoint) stays un-embedded: its never-embedded chunks are left as they are, and
  vectors of another model are cleared, as a rebuild would (``sources/indexer.py``: a refused
  source becomes full-text only, whatever an earlier policy allowed). Without an endpoint nothing
  is done at all;
- every other stale chunk goes through the gate like an ingest's (redacted first, then sent), in
  batches of ``batch_size`` chunks, each batch written and committed on its own: a run that stops
  (Ctrl-C, an endpoint outage) keeps what it wrote, and the next run picks up the chunks still
  stale, so running it twice is running it once. A vector of the same content already stored
  under the configured model in the source is copied instead of being embedded again.

Memory sources (``memory_projects``) are left alone: their chunks are memories, which the memory
API re-embeds. Open builds too: the ingest that writes them embeds with its own configuration.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg

from context_ledger.dlp.classification import Classification
from context_ledger.dlp.gate import EmbeddingGate, Refusal
from context_ledger.sources.store import store_embeddings

DEFAULT_BATCH_SIZE = 64

#: A stale chunk, for ``model`` and ``dims`` (NULL: any dimension).
_STALE = """
(c.embedding IS NULL OR c.embedding_model IS DISTINCT FROM %(model)s
 OR (%(dims)s::integer IS NOT NULL AND c.embedding_dims <> %(dims)s::integer))
"""

_SOURCES = f"""
SELECT s.org_id, s.id, s.name, s.classification, s.index_version AS version,
       count(c.id) FILTER (WHERE c.embedding IS NULL) AS unembedded,
       count(c.id) FILTER (WHERE c.embedding IS NOT NULL AND {_STALE}) AS other_model
FROM sources s
JOIN chunks c ON c.source_id = s.id AND c.index_version = s.index_version
WHERE s.index_version > 0
  AND (%(org_id)s::uuid IS NULL OR s.org_id = %(org_id)s::uuid)
  AND (%(source_id)s::uuid IS NULL OR s.id = %(source_id)s::uuid)
  AND NOT EXISTS (SELECT 1 FROM memory_projects m WHERE m.source_id = s.id)
GROUP BY s.org_id, s.id
ORDER BY s.org_id, s.created_at, s.id
"""

#: The next stale chunks of the version listed, while it is still the published one (a source
#: republished meanwhile was built with the ingest's own model: the run stops there).
_STALE_BATCH = f"""
SELECT c.id, c.content, c.content_sha256, c.embedding IS NULL AS unembedded
FROM chunks c JOIN sources s ON s.id = c.source_id AND c.index_version = s.index_version
WHERE s.id = %(source_id)s AND s.index_version = %(version)s AND {_STALE}
  AND (%(after)s::uuid IS NULL OR c.id > %(after)s::uuid)
ORDER BY c.id
LIMIT %(limit)s
"""

_REUSABLE = """
SELECT DISTINCT ON (c.content_sha256) c.content_sha256, c.embedding
FROM chunks c
WHERE c.source_id = %(source_id)s AND c.content_sha256 = ANY(%(hashes)s)
  AND c.embedding IS NOT NULL AND c.embedding_model = %(model)s
  AND (%(dims)s::integer IS NULL OR c.embedding_dims = %(dims)s::integer)
"""

_CLEAR_OTHER_MODEL = f"""
UPDATE chunks c SET embedding = NULL, embedding_model = NULL
WHERE c.source_id = %(source_id)s AND c.index_version = %(version)s
  AND c.embedding IS NOT NULL AND {_STALE}
"""

#: The version's ``embedded_count`` (the sources API reports it), moved by what a batch changed.
_ADD_EMBEDDED = """
UPDATE index_versions SET embedded_count = embedded_count + %(added)s
WHERE source_id = %(source_id)s AND version = %(version)s
"""


@dataclass(frozen=True)
class StaleSource:
    """A source whose published version holds chunks not embedded with the configured model."""

    org_id: uuid.UUID
    id: uuid.UUID
    name: str
    classification: Classification
    version: int
    #: chunks without an embedding
    unembedded: int
    #: chunks embedded with another model (or dimension)
    other_model: int

    @property
    def stale(self) -> int:
        return self.unembedded + self.other_model


@dataclass(frozen=True)
class Reembedded:
    """What one source's run did."""

    source: StaleSource
    #: chunks now embedded with the configured model: sent to the endpoint, or copied
    embedded: int = 0
    #: of those, vectors copied from a chunk of the same content
    reused: int = 0
    #: vectors of another model removed because the gate refuses the source
    cleared: int = 0
    #: why the gate sends nothing of this source, if it does not
    refusal: Refusal | None = None


def stale_sources(
    conn: psycopg.Connection,
    *,
    model: str,
    dimensions: int | None,
    org_id: uuid.UUID | None = None,
    source_id: uuid.UUID | None = None,
) -> list[StaleSource]:
    """Every source (of ``org_id``, or only ``source_id``) with stale chunks, oldest first."""
    rows = conn.execute(
        _SOURCES,
        {"model": model, "dims": dimensions, "org_id": org_id, "source_id": source_id},
    ).fetchall()
    return [
        StaleSource(
            org_id=row["org_id"],
            id=row["id"],
            name=row["name"],
            classification=Classification(row["classification"]),
            version=row["version"],
            unembedded=row["unembedded"],
            other_model=row["other_model"],
        )
        for row in rows
        if row["unembedded"] or row["other_model"]
    ]


def work_of(source: StaleSource, gate: EmbeddingGate) -> int:
    """The chunks a run writes for ``source``: all stale ones, or the vectors it clears."""
    refusal = gate.refusal(source.classification)
    if refusal is Refusal.NO_ENDPOINT:
        return 0
    return source.other_model if refusal else source.stale


def reembed_source(
    conn: psycopg.Connection,
    source: StaleSource,
    *,
    gate: EmbeddingGate,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[int], None] = lambda done: None,
) -> Reembedded:
    """Bring ``source``'s published chunks to the gate's model, committing batch by batch.

    ``conn`` must not be inside a transaction: each batch commits on its own (and a failure
    rolls back that batch only). ``progress`` is called with the chunks each batch wrote.
    Endpoint failures propagate (``EmbeddingsUnavailableError``), as do DLP scan failures
    (``DlpScanFailedError``): nothing of the failing batch was written, earlier batches stay.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    model, dims = gate.model, gate.client.dimensions if gate.client else None
    params = {"source_id": source.id, "version": source.version, "model": model, "dims": dims}
    refusal = gate.refusal(source.classification)
    if model is None:  # no endpoint: nothing to compare with, nothing is cleared either
        return Reembedded(source, refusal=Refusal.NO_ENDPOINT)
    if refusal is not None:
        with conn.transaction():
            cleared = conn.execute(_CLEAR_OTHER_MODEL, params).rowcount
            conn.execute(_ADD_EMBEDDED, {**params, "added": -cleared})
        progress(cleared)
        return Reembedded(source, cleared=cleared, refusal=refusal)
    embedded = reused = 0
    after: uuid.UUID | None = None
    while True:
        batch = conn.execute(
            _STALE_BATCH, {**params, "after": after, "limit": batch_size}
        ).fetchall()
        if not batch:
            break
        vectors, copied = _vectors(conn, source, gate, batch, params)
        rows = [(row["id"], vector) for row, vector in zip(batch, vectors, strict=True)]
        with conn.transaction():
            store_embeddings(conn, rows, model)
            added = sum(row["unembedded"] for row in batch)
            conn.execute(_ADD_EMBEDDED, {**params, "added": added})
        embedded += len(batch)
        reused += copied
        after = batch[-1]["id"]
        progress(len(batch))
    return Reembedded(source, embedded, reused)


def _vectors(
    conn: psycopg.Connection,
    source: StaleSource,
    gate: EmbeddingGate,
    batch: Sequence[dict],
    params: dict,
) -> tuple[list[list[float]], int]:
    """One vector per chunk of ``batch``: copied by content hash where the source has one of
    this model, else embedded through the gate (each distinct content once). The caller has
    checked that the gate lets this source through."""
    hashes = list({bytes(row["content_sha256"]) for row in batch})
    known = {
        bytes(row["content_sha256"]): row["embedding"]
        for row in conn.execute(_REUSABLE, {**params, "hashes": hashes})
    }
    missing: dict[bytes, str] = {}
    for row in batch:
        sha = bytes(row["content_sha256"])
        if sha not in known:
            missing.setdefault(sha, row["content"])
    fresh = gate.embed_source_texts(
        classification=source.classification, texts=list(missing.values())
    )
    assert fresh is not None, "the gate refuses this source"
    known.update(zip(missing, fresh, strict=True))
    copied = len(batch) - len(missing)
    return [known[bytes(row["content_sha256"])] for row in batch], copied
