"""The gate in front of the embeddings endpoint: the only way source content reaches it.

Every caller that wants source text or a query embedded goes through :func:`embed_source_texts`
or :func:`embed_query_text`; nothing else in the code base calls ``EmbeddingsClient.embed``.

What the gate enforces today (spec, "Embeddings"):

- sources classified ``confidential``, ``restricted`` or ``regulated`` (DLP action ``drop`` or
  ``block_source``) are never sent to any embeddings endpoint, internal or external: they are
  searchable through full-text only. That also covers the rule that confidential and restricted
  sources never reach an external endpoint;
- without a configured endpoint nothing is sent.

A later DLP issue adds the organisation's classification policies and redaction (only redacted
text is embedded; a scan failure stops the run and sends nothing). It will extend these
keyword-only signatures (the organisation's policy, the endpoint's locality, a scanner) rather
than change them, so callers already pass everything by name.
"""

from __future__ import annotations

from collections.abc import Sequence

from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.sources.model import Classification

#: Classifications whose content is never sent to an embeddings endpoint.
NEVER_EMBEDDED = frozenset(
    {Classification.CONFIDENTIAL, Classification.RESTRICTED, Classification.REGULATED}
)


def may_embed(classification: Classification) -> bool:
    """Whether content of this classification may be sent to an embeddings endpoint at all."""
    return Classification(classification) not in NEVER_EMBEDDED


def embed_source_texts(
    *,
    classification: Classification,
    texts: Sequence[str],
    client: EmbeddingsClient | None,
) -> list[list[float]] | None:
    """Vectors for a source's texts, or None when nothing may be (or can be) sent.

    None means "full-text only": no client is configured, or the classification forbids
    embedding. Errors from the endpoint propagate as ``EmbeddingsUnavailableError``.
    """
    if client is None or not may_embed(classification):
        return None
    if not texts:
        return []
    return client.embed(texts)


def embed_query_text(*, text: str, client: EmbeddingsClient | None) -> list[float] | None:
    """The query's vector, or None without a client or for a blank query (full-text only)."""
    if client is None or not text.strip():
        return None
    return client.embed([text])[0]
