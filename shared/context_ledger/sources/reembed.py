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
from context_ledger.sources import store

DEFAULT_BATCH_SIZE = 64


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
    rows = store.sources_with_stale_chunks(
        conn, model=model, dimensions=dimensions, org_id=org_id, source_id=source_id
    )
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
    refusal = gate.refusal(source.classification)
    if model is None:  # no endpoint: nothing to compare with, nothing is cleared either
        return Reembedded(source, refusal=Refusal.NO_ENDPOINT)
    if refusal is not None:
        with conn.transaction():
            cleared = store.clear_other_model_embeddings(
                conn, source_id=source.id, version=source.version, model=model, dimensions=dims
            )
            store.add_counts(conn, source_id=source.id, version=source.version, embedded=-cleared)
        progress(cleared)
        return Reembedded(source, cleared=cleared, refusal=refusal)
    embedded = reused = 0
    after: uuid.UUID | None = None
    while True:
        batch = store.stale_chunks(
            conn,
            source_id=source.id,
            version=source.version,
            model=model,
            dimensions=dims,
            after=after,
            limit=batch_size,
        )
        if not batch:
            break
        vectors, copied = _vectors(conn, source, gate, batch, model=model, dimensions=dims)
        rows = [(row["id"], vector) for row, vector in zip(batch, vectors, strict=True)]
        with conn.transaction():
            store.store_embeddings(conn, rows, model)
            added = sum(row["unembedded"] for row in batch)
            store.add_counts(conn, source_id=source.id, version=source.version, embedded=added)
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
    *,
    model: str,
    dimensions: int | None,
) -> tuple[list[list[float]], int]:
    """One vector per chunk of ``batch``: copied by content hash where the source has one of
    this model, else embedded through the gate (each distinct content once). The caller has
    checked that the gate lets this source through."""
    known = store.embeddings_by_content(
        conn,
        source_id=source.id,
        hashes=list({bytes(row["content_sha256"]) for row in batch}),
        model=model,
        dims=dimensions,
    )
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
