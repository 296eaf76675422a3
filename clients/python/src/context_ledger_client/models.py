"""Typed, immutable results of the API's answers, and :class:`NewMemory`, the one input with
enough fields to deserve a type (an item of a batch write).

Field names are Python's (snake_case); each ``from_json`` reads the wire names of the API
(camelCase for the context API, snake_case for the memory API). Free-form parts (chunk metadata,
an attribution's evidence record, a memory's metadata) stay plain mappings: their keys are data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Chunk:
    """One delivered chunk. Related code (``related_to`` set) comes after the ranked chunks with
    score 0."""

    id: str
    source_id: str
    space_id: str
    level: str
    kind: str
    path: str
    title: str | None
    content: str
    score: float
    tokens: int
    metadata: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Chunk:
        return cls(
            id=data["id"],
            source_id=data["sourceId"],
            space_id=data["spaceId"],
            level=data["level"],
            kind=data["kind"],
            path=data["path"],
            title=data.get("title"),
            content=data["content"],
            score=data["score"],
            tokens=data["tokens"],
            metadata=dict(data.get("metadata") or {}),
        )

    @property
    def symbol(self) -> str | None:
        return self.metadata.get("symbol")

    @property
    def language(self) -> str | None:
        return self.metadata.get("language")

    @property
    def start_line(self) -> int | None:
        return self.metadata.get("startLine")

    @property
    def end_line(self) -> int | None:
        return self.metadata.get("endLine")

    @property
    def lines(self) -> str:
        """``12-40`` (or ``12`` for one line, ``""`` when the chunk has no line numbers)."""
        start, end = self.start_line, self.end_line
        if start is None:
            return ""
        return str(start) if end in (None, start) else f"{start}-{end}"

    @property
    def related_to(self) -> str | None:
        """The ranked chunk this one is related to, for related code."""
        return self.metadata.get("relatedTo")

    @property
    def related_relation(self) -> str | None:
        """``calls``, ``called_by`` or ``tested_by``, for related code."""
        return self.metadata.get("relatedRelation")


@dataclass(frozen=True)
class SourceSummary:
    """What one source contributed to an answer."""

    id: str
    name: str
    kind: str
    chunks: int
    tokens: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SourceSummary:
        return cls(data["id"], data["name"], data["kind"], data["chunks"], data["tokens"])


@dataclass(frozen=True)
class RetrieveResult:
    """A retrieval's answer; ``raw`` is the JSON body as the API sent it."""

    chunks: tuple[Chunk, ...]
    sources_summary: tuple[SourceSummary, ...]
    tokens_used: int
    attribution_id: str
    request_id: str
    search_mode: str
    warnings: tuple[str, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetrieveResult:
        return cls(
            chunks=tuple(Chunk.from_json(c) for c in data["chunks"]),
            sources_summary=tuple(SourceSummary.from_json(s) for s in data["sourcesSummary"]),
            tokens_used=data["tokensUsed"],
            attribution_id=data["attributionId"],
            request_id=data["requestId"],
            search_mode=data.get("searchMode", "full_text"),
            warnings=tuple(data.get("warnings") or ()),
            raw=data,
        )


@dataclass(frozen=True)
class AttributionLink:
    response_id: str
    created_at: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttributionLink:
        return cls(data["responseId"], data["createdAt"])


@dataclass(frozen=True)
class Attribution:
    """The evidence record of one retrieval and the AI responses linked to it. ``record`` is what
    the retrieval published (chunks with their SHA-256, sources, client); ``chain`` and
    ``sequence`` locate it in the organisation's HMAC chain."""

    attribution_id: str
    request_id: str
    user_id: str
    space_id: str | None
    created_at: str
    sequence: int
    chain: str
    record: Mapping[str, Any]
    links: tuple[AttributionLink, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attribution:
        return cls(
            attribution_id=data["attributionId"],
            request_id=data["requestId"],
            user_id=data["userId"],
            space_id=data.get("spaceId"),
            created_at=data["createdAt"],
            sequence=data["sequence"],
            chain=data["chain"],
            record=data["record"],
            links=tuple(AttributionLink.from_json(link) for link in data.get("links") or ()),
        )


@dataclass(frozen=True)
class Space:
    """A space; ``permissions`` are the caller's own on it."""

    id: str
    name: str
    level: str
    parent_id: str | None
    key: str | None
    created_at: str
    permissions: tuple[str, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Space:
        return cls(
            id=data["id"],
            name=data["name"],
            level=data["level"],
            parent_id=data.get("parentId"),
            key=data.get("key"),
            created_at=data["createdAt"],
            permissions=tuple(data.get("permissions") or ()),
        )


@dataclass(frozen=True)
class Source:
    """A source of a space; ``index_version`` is the published snapshot searches see (0: none)."""

    id: str
    space_id: str
    kind: str
    name: str
    classification: str
    index_version: int
    created_at: str
    updated_at: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Source:
        return cls(
            id=data["id"],
            space_id=data["spaceId"],
            kind=data["kind"],
            name=data["name"],
            classification=data["classification"],
            index_version=data["indexVersion"],
            created_at=data["createdAt"],
            updated_at=data["updatedAt"],
        )


@dataclass(frozen=True)
class SkippedFiles:
    """Files of a folder that were not sent, by reason, with their paths."""

    binary: int = 0
    too_large: int = 0
    unreadable: int = 0
    #: a path that is not UTF-8 or longer than the API's 1,024 characters
    bad_name: int = 0
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class IndexReport:
    """A folder indexed as one published build of a source."""

    version: int
    files: int
    bytes: int
    chunks: int
    tokens: int
    edges: int
    embedded: int
    skipped: SkippedFiles


@dataclass(frozen=True)
class Memory:
    """An agent memory (memory API); timestamps are epoch seconds as the API sends them."""

    id: str
    org_id: str
    project_id: str
    agent_key: str | None
    type: str
    content: str
    confidence: float
    importance: float
    access_count: int
    last_accessed_at: float | None
    created_at: float
    updated_at: float
    metadata: Mapping[str, Any]

    @classmethod
    def _fields_of(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "id": data["id"],
            "org_id": data["org_id"],
            "project_id": data["project_id"],
            "agent_key": data.get("agent_key"),
            "type": data["type"],
            "content": data["content"],
            "confidence": data["confidence"],
            "importance": data["importance"],
            "access_count": data["access_count"],
            "last_accessed_at": data.get("last_accessed_at"),
            "created_at": data["created_at"],
            "updated_at": data["updated_at"],
            "metadata": dict(data.get("metadata") or {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Memory:
        return cls(**cls._fields_of(data))


@dataclass(frozen=True)
class WrittenMemory(Memory):
    """A write's answer: the memory stored, or with ``dedupe`` the live memory it equals
    (``duplicate``: nothing was stored, and that memory is unchanged)."""

    duplicate: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WrittenMemory:
        return cls(**cls._fields_of(data), duplicate=bool(data.get("duplicate", False)))


@dataclass(frozen=True)
class NewMemory:
    """A memory to write; the fields left None take the API's defaults (``fact``, confidence
    1.0, importance 0.5, no metadata). ``dedupe``: answer a live memory of the same type with the
    same content (whitespace and case folded) instead of storing a copy."""

    content: str
    type: str | None = None
    agent_key: str | None = None
    confidence: float | None = None
    importance: float | None = None
    metadata: Mapping[str, Any] | None = None
    dedupe: bool | None = None

    def to_json(self) -> dict[str, Any]:
        """The write body: only the fields given."""
        body = {
            "content": self.content,
            "type": self.type,
            "agent_key": self.agent_key,
            "confidence": self.confidence,
            "importance": self.importance,
            "metadata": dict(self.metadata) if self.metadata is not None else None,
            "dedupe": self.dedupe,
        }
        return {k: v for k, v in body.items() if v is not None}


@dataclass(frozen=True)
class MemoryBatch:
    """A batch write's answer: one id per item, in order; ``duplicates`` and ``pending`` are the
    positions of the items answered with a live memory's id and of those waiting for review."""

    project_id: str
    ids: tuple[str, ...]
    duplicates: tuple[int, ...]
    pending: tuple[int, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryBatch:
        return cls(
            project_id=data["project_id"],
            ids=tuple(data["ids"]),
            duplicates=tuple(data["duplicates"]),
            pending=tuple(data["pending"]),
        )


@dataclass(frozen=True)
class MemoryReembedding:
    """One re-embedding step's answer: memories re-embedded now, those still waiting (other
    workers may hold them), those the DLP policy keeps from the endpoint, the service's model."""

    reembedded: int
    remaining: int
    withheld: int
    model: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryReembedding:
        return cls(
            reembedded=data["reembedded"],
            remaining=data["remaining"],
            withheld=data["withheld"],
            model=data["model"],
        )


@dataclass(frozen=True)
class RankedMemory(Memory):
    """A memory of a ``/relevant`` answer, with its score (0-1), similarity and why."""

    score: float = 0.0
    similarity: float = 0.0
    justification: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankedMemory:
        return cls(
            **cls._fields_of(data),
            score=data["score"],
            similarity=data["similarity"],
            justification=data["justification"],
        )


@dataclass(frozen=True)
class PendingRevision:
    """A write to a project with review required: stored, not served until an admin accepts it."""

    id: str
    project_id: str
    revision: int
    state: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PendingRevision:
        return cls(data["id"], data["project_id"], data["revision"], data["state"])


@dataclass(frozen=True)
class MemoryList:
    """A page of a project's memories, newest first."""

    project_id: str
    memories: tuple[Memory, ...]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryList:
        return cls(data["project_id"], tuple(Memory.from_json(m) for m in data["memories"]))


@dataclass(frozen=True)
class RelevantMemories:
    """A ``/relevant`` answer, ranked by score; ``tokens_used`` only when a budget was given."""

    project_id: str
    query: str
    memories: tuple[RankedMemory, ...]
    tokens_used: int | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RelevantMemories:
        return cls(
            project_id=data["project_id"],
            query=data["query"],
            memories=tuple(RankedMemory.from_json(m) for m in data["memories"]),
            tokens_used=data.get("tokens_used"),
        )


@dataclass(frozen=True)
class MemoryRevision:
    """One revision of a memory: ``accepted`` (served), ``superseded`` or ``pending``."""

    revision: int
    state: str
    type: str
    content: str
    confidence: float
    importance: float
    metadata: Mapping[str, Any]
    author: str | None
    created_at: float
    accepted_at: float | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryRevision:
        return cls(
            revision=data["revision"],
            state=data["state"],
            type=data["type"],
            content=data["content"],
            confidence=data["confidence"],
            importance=data["importance"],
            metadata=dict(data.get("metadata") or {}),
            author=data.get("author"),
            created_at=data["created_at"],
            accepted_at=data.get("accepted_at"),
        )
