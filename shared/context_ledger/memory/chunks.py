"""Team memory in the context API: a memory's accepted revision as a chunk of its project's
memory source, and what a retrieval's attribution record says about such a chunk.

Chunk metadata carries ``memoryId`` and ``memoryRevision``; the attribution record of a
retrieval copies them into the chunk's entry (spec: "for team memory chunks, the entry and its
accepted revision").
"""

from __future__ import annotations

import hashlib
from typing import Any

MEMORY_ID_KEY = "memoryId"
MEMORY_REVISION_KEY = "memoryRevision"
#: Metadata keys whose values are identifiers, not text: delivered as stored (the memory API
#: serves the memory's id, type and agent key as they are too).
IDENTIFIER_KEYS = frozenset({MEMORY_ID_KEY, MEMORY_REVISION_KEY, "memoryType", "agentKey"})


def chunk_path(memory_id: str) -> str:
    """The path of a memory's chunk in its memory source."""
    return f"memories/{memory_id}"


def memory_chunk(
    *,
    memory_id: str,
    revision: int,
    memory_type: str,
    agent_key: str | None,
    content: str,
    search_text: str,
    token_count: int,
    embedding: list[float] | None,
    embedding_model: str | None,
) -> dict[str, Any]:
    """The chunk row of a memory's accepted revision (for ``store.replace_chunk``).

    ``search_text`` is what full-text search indexes: the content redacted with the
    organisation's rules (sources/indexer.py says why). ``embedding`` is set only when it came
    from the configured endpoint: retrieval's vector search compares chunks with that endpoint's
    query vectors and nothing else.
    """
    return {
        "content": content,
        "sha256": hashlib.sha256(content.encode()).digest(),
        "token_count": token_count,
        "search_text": search_text,
        "embedding": embedding,
        "embedding_model": embedding_model if embedding is not None else None,
        "metadata": {
            MEMORY_ID_KEY: memory_id,
            MEMORY_REVISION_KEY: revision,
            "memoryType": memory_type,
            "agentKey": agent_key,
        },
    }


def attribution_fields(chunk_metadata: dict[str, Any]) -> dict[str, Any]:
    """``{"memoryId", "memoryRevision"}`` for a memory chunk, ``{}`` for any other chunk."""
    memory_id = chunk_metadata.get(MEMORY_ID_KEY)
    revision = chunk_metadata.get(MEMORY_REVISION_KEY)
    if isinstance(memory_id, str) and isinstance(revision, int):
        return {MEMORY_ID_KEY: memory_id, MEMORY_REVISION_KEY: revision}
    return {}
