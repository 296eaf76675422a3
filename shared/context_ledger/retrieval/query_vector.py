"""The query's vector, or full-text only when the embeddings endpoint cannot give it in time.

The spec searches full-text only without an embeddings endpoint. An endpoint that is configured
but down or slow is treated the same way for the request at hand rather than failing it: the
caller still gets the full-text ranking, told so in the answer (``searchMode: "full_text"`` and a
warning) and in the evidence record. A person is waiting on a retrieval, so the query's embedding
gets ``KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS`` in all (retries included), and after a
failure this process skips the endpoint for ``KEYSTONE_CONTEXT_EMBEDDINGS_COOLDOWN_SECONDS``, so
an outage costs one timeout per warm container and cooldown, not one per request.

A DLP scan failure is not degraded: it fails closed (``503 context.dlp.scan_failed``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from context_ledger.cooldown import Cooldown
from context_ledger.dlp.gate import EmbeddingGate
from context_ledger.embeddings.client import EmbeddingsUnavailableError
from context_ledger.log import logger
from context_ledger.settings import Settings

DEGRADED_WARNING = (
    "the embeddings endpoint did not answer in time; this answer is ranked by full-text search only"
)


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    FULL_TEXT = "full_text"


@dataclass(frozen=True)
class QueryVector:
    """The vector to search with (None: full-text only) and why the search is what it is."""

    vector: list[float] | None
    mode: SearchMode
    degraded: bool = False


def without_embedding(gate: EmbeddingGate) -> QueryVector:
    """What a search that needs no query embedding (a cached one, or none at all) reports."""
    return QueryVector(None, SearchMode.HYBRID if gate.client is not None else SearchMode.FULL_TEXT)


def query_vector(
    gate: EmbeddingGate, query: str, *, settings: Settings, cooldown: Cooldown
) -> QueryVector:
    """Embed the (redacted) query in the configured time, or fall back to full-text."""
    if gate.client is None:
        return without_embedding(gate)
    if cooldown.active():
        return QueryVector(None, SearchMode.FULL_TEXT, degraded=True)
    try:
        vector = gate.embed_query_text(query, within=settings.embeddings_query_timeout_seconds)
    except EmbeddingsUnavailableError as exc:
        cooldown.start(settings.embeddings_cooldown_seconds)
        logger.warning(
            "query embedding failed; searching full-text only",
            extra={"problem": str(exc), "cooldown_s": settings.embeddings_cooldown_seconds},
        )
        return QueryVector(None, SearchMode.FULL_TEXT, degraded=True)
    return QueryVector(vector, SearchMode.HYBRID if vector is not None else SearchMode.FULL_TEXT)
