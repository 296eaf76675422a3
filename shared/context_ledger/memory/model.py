"""The memory API's vocabulary: memory types, field limits, ids and the served view of a memory.

Wire names are the spec's (snake_case, timestamps as float epoch seconds), unlike the context
API's camelCase: the memory API is a second surface with its own contract.
"""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class MemoryType(StrEnum):
    """What a memory records. ``fact`` is the default."""

    DECISION = "decision"
    CONSTRAINT = "constraint"
    FACT = "fact"
    PREFERENCE = "preference"
    TO_DO = "todo"  # not a marker: the memory type for open tasks
    NOTE = "note"


#: A project key is a space key (the ``spaces.key`` check of migration 0001).
PROJECT_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MEMORY_ID = re.compile(r"^ctx_[0-9a-f]{12}$")
AGENT_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}$")
MAX_CONTENT_CHARS = 32_000
MAX_METADATA_BYTES = 16_384
DEFAULT_CONFIDENCE = 1.0
DEFAULT_IMPORTANCE = 0.5


def new_memory_id() -> str:
    """``ctx_`` + 12 random hex characters (48 bits; a collision is retried on insert)."""
    return f"ctx_{secrets.token_hex(6)}"


def epoch(value: datetime | None) -> float | None:
    """Float epoch seconds, as the spec's timestamps are."""
    return value.timestamp() if value is not None else None


@dataclass(frozen=True)
class Memory:
    """A memory as served: its entry and the fields of its accepted revision."""

    id: str
    org_id: uuid.UUID
    project_id: str
    agent_key: str | None
    type: str
    content: str
    confidence: float | None
    importance: float | None
    access_count: int
    last_accessed_at: datetime | None
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """The stored fields, in the spec's order (never the embedding)."""
        return {
            "id": self.id,
            "org_id": str(self.org_id),
            "project_id": self.project_id,
            "agent_key": self.agent_key,
            "type": self.type,
            "content": self.content,
            "confidence": self.confidence,
            "importance": self.importance,
            "access_count": self.access_count,
            "last_accessed_at": epoch(self.last_accessed_at),
            "created_at": epoch(self.created_at),
            "updated_at": epoch(self.updated_at),
            "metadata": self.metadata,
        }


@dataclass(frozen=True)
class Revision:
    """One revision of a memory's content and fields."""

    revision: int
    state: str
    type: str
    content: str
    confidence: float | None
    importance: float | None
    metadata: dict[str, Any]
    author: str
    created_at: datetime
    accepted_at: datetime | None

    def to_wire(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "state": self.state,
            "type": self.type,
            "content": self.content,
            "confidence": self.confidence,
            "importance": self.importance,
            "metadata": self.metadata,
            "author": self.author,
            "created_at": epoch(self.created_at),
            "accepted_at": epoch(self.accepted_at),
        }
