"""The vocabulary of ingestion: source kinds, classifications, documents and chunks."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class SourceKind(StrEnum):
    CODEBASE = "codebase"
    DOCS = "docs"
    CONVERSATIONS = "conversations"
    ISSUES = "issues"
    WORKSPACE_LIVE = "workspace_live"
    REGULATORY = "regulatory"
    CUSTOM = "custom"


class EdgeRelation(StrEnum):
    """Stored relations between code chunks; ``called_by`` is ``calls`` read backwards."""

    CALLS = "calls"
    TESTED_BY = "tested_by"


#: The longest document path the index API takes (``context-ledger ingest`` skips longer ones).
MAX_PATH_CHARS = 1024


@dataclass(frozen=True)
class Document:
    """One file or text of a snapshot, as uploaded."""

    path: str
    content: str
    language: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document, ready to store.

    ``symbol`` names the function, method or type a code chunk holds (Go ``Refunds.Authorise``
    for a method, ``Authorise`` for a function; Python ``Class.method``); prose chunks have none.
    ``code`` says whether it was cut as code: full-text search then indexes its identifiers'
    parts besides its words (``chunking.identifiers.search_text``, of the redacted content: the
    indexer builds it). Lines are 1-based and inclusive.
    """

    path: str
    content: str
    content_sha256: bytes
    token_count: int
    code: bool
    language: str | None = None
    symbol: str | None = None
    start_line: int | None = None
    end_line: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SymbolEdge:
    """A code-graph edge between two symbols of one snapshot, by (path, symbol)."""

    from_path: str
    from_symbol: str
    to_path: str
    to_symbol: str
    relation: EdgeRelation
