"""Team memory in the context API: a memory's accepted revision as a chunk of its project's
memory source. Its metadata keys, and what a retrieval's attribution record says about such a
chunk, are the attribution's (``attribution/events.py``): retrieval reads them without
importing memory.
"""

from __future__ import annotations

import hashlib

from context_ledger.attribution.events import MEMORY_ID_KEY, MEMORY_REVISION_KEY
from context_ledger.sources.store import NewChunk


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
) -> NewChunk:
    """The chunk of a memory's accepted revision (for ``sources.store.replace_served_chunk``).

    ``search_text`` is what full-text search indexes: the content redacted with the
    organisation's rules (sources/indexer.py says why). ``embedding`` is set only when it came
    from the configured endpoint: retrieval's vector search compares chunks with that endpoint's
    query vectors and nothing else.
    """
    return NewChunk(
        path=chunk_path(memory_id),
        ordinal=0,
        content=content,
        content_sha256=hashlib.sha256(content.encode()).digest(),
        token_count=token_count,
        search_text=search_text,
        embedding=embedding,
        metadata={
            MEMORY_ID_KEY: memory_id,
            MEMORY_REVISION_KEY: revision,
            "memoryType": memory_type,
            "agentKey": agent_key,
        },
    )
