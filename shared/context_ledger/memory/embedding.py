"""Which embedder the memory API uses, and the two functions through which texts reach it.

With an embeddings endpoint configured (``KEYSTONE_CONTEXT_EMBEDDINGS_URL``), memories and queries
are embedded by it, like the context API's chunks. Without one, /relevant embeds in-process with
:class:`HashingEmbeddingProvider` (128 dimensions): computed locally, it sends nothing anywhere,
and it is what the spec's example justifications name. Either way the text goes through the DLP
gate (:func:`embed_contents`, :func:`embed_query`), so redaction applies before anything is
embedded.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import psycopg

from context_ledger.dlp.classification import Classification
from context_ledger.dlp.gate import open_gate
from context_ledger.dlp.policy import DlpPolicy
from context_ledger.embeddings.client import EmbeddingsClient, get_embeddings_client
from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.memory.scoring import unit
from context_ledger.settings import Settings

#: Memory sources are internal: their content may be embedded (after redaction).
MEMORY_CLASSIFICATION = Classification.INTERNAL


class Embedder(Protocol):
    def embed(self, texts: Sequence[str], *, within: float | None = None) -> list[list[float]]: ...


@dataclass(frozen=True)
class MemoryEmbedder:
    """An embedder and the name /relevant's justification gives it."""

    embedder: Embedder
    name: str
    dimensions: int | None
    #: the configured endpoint's client (its vectors also serve retrieval), or None
    client: EmbeddingsClient | None

    def provider(self, dimensions: int) -> str:
        """What a stored vector records as its provider: vectors of two providers (or two
        dimensions) are incompatible."""
        return f"{self.name}/{dimensions}"

    def label(self, dimensions: int | None = None) -> str:
        dims = dimensions or self.dimensions
        return f"{self.name}, {dims}d" if dims else self.name


def memory_embedder(settings: Settings) -> MemoryEmbedder:
    """The configured endpoint's client, else the in-process hashing provider."""
    client = get_embeddings_client() if settings.embeddings_url else None
    if client is not None:
        return MemoryEmbedder(
            embedder=client,
            name=client.model,
            dimensions=settings.embeddings_dimensions,
            client=client,
        )
    hashing = HashingEmbeddingProvider()
    return MemoryEmbedder(
        embedder=hashing, name=hashing.name, dimensions=hashing.dimensions, client=None
    )


def embed_contents(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    embedder: MemoryEmbedder,
    settings: Settings,
    policy: DlpPolicy,
    texts: Sequence[str],
) -> list[np.ndarray | None]:
    """The unit vectors of memory contents, in one call through the organisation's DLP gate
    (with its ``policy``, which the caller holds): redacted as the gate redacts, and a scan
    failure before any text is sent. All None when the gate sends nothing (the memories then
    match no query). A batch write sends its memories together, as the endpoint's client
    batches them."""
    if not texts:
        return []
    gate = open_gate(
        conn, org_id=org_id, client=embedder.embedder, settings=settings, policy=policy
    )
    vectors = gate.embed_source_texts(classification=MEMORY_CLASSIFICATION, texts=list(texts))
    if vectors is None:
        return [None] * len(texts)
    return [unit(vector) for vector in vectors]


def embed_query(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    embedder: MemoryEmbedder,
    settings: Settings,
    policy: DlpPolicy,
    text: str,
) -> np.ndarray | None:
    """The unit vector of a /relevant query as the DLP gate lets it be embedded; None when the
    gate sends nothing.

    It gets ``KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS`` in all, retries included: an
    endpoint that is down or slow fails /relevant with ``503 service_unavailable`` in that time.
    It does not degrade to scoring without similarity: the spec promises the same result for the
    same store and query, and its answer has no field to say it is degraded.
    """
    # The gate takes any object with the client's ``embed``: the hashing provider has it.
    gate = open_gate(
        conn, org_id=org_id, client=embedder.embedder, settings=settings, policy=policy
    )
    vector = gate.embed_query_text(text, within=settings.embeddings_query_timeout_seconds)
    return unit(vector) if vector is not None else None
