"""What a framework retriever's document says about one delivered chunk: the same keys for the
LangChain documents and the LlamaIndex nodes, so an application can move between the two."""

from __future__ import annotations

from typing import Any

from context_ledger_client.models import Chunk, RetrieveResult

#: Keys that identify rather than describe: an application links and cites with them, a model
#: reading the chunk has no use for them (the LlamaIndex nodes keep them out of the prompt).
IDENTIFIER_KEYS = (
    "score",
    "tokens",
    "chunk_id",
    "source_id",
    "space_id",
    "related_to",
    "attribution_id",
    "request_id",
)


def chunk_metadata(result: RetrieveResult, chunk: Chunk) -> dict[str, Any]:
    """Where the chunk came from, its score and tokens, and the retrieval's attribution and
    request ids (flat: strings, numbers and None only)."""
    return {
        "path": chunk.path,
        "lines": chunk.lines,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "symbol": chunk.symbol,
        "title": chunk.title,
        "language": chunk.language,
        "level": chunk.level,
        "kind": chunk.kind,
        "score": chunk.score,
        "tokens": chunk.tokens,
        "chunk_id": chunk.id,
        "source_id": chunk.source_id,
        "space_id": chunk.space_id,
        "related_to": chunk.related_to,
        "related_relation": chunk.related_relation,
        "attribution_id": result.attribution_id,
        "request_id": result.request_id,
    }
