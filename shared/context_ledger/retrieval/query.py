"""What a retrieval is asked: the use case's input, whoever asks (the API, MCP through the
API, the evaluation harness). The edge (``http/retrieve.py``) validates and lowers the fields
as the spec says before building one; the use case knows nothing of HTTP."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from context_ledger.retrieval.limits import DEFAULT_MAX_PER_LEVEL, DEFAULT_TOKEN_BUDGET
from context_ledger.sources.model import SourceKind
from context_ledger.spaces.service import parse_space_id


@dataclass(frozen=True)
class RetrieveQuery:
    query: str
    #: As sent (any JSON value, recorded as such in the evidence); None: the organisation chain.
    #: A value that is not a visible space's UUID is an unknown space (404).
    space_id: Any = None
    token_budget: int = DEFAULT_TOKEN_BUDGET
    max_per_level: int = DEFAULT_MAX_PER_LEVEL
    lens_id: str | None = None
    session_id: str | None = None
    exclude_related: bool = False
    source_kinds: frozenset[SourceKind] | None = None

    def space_uuid(self) -> uuid.UUID | None:
        """The space to start from; a value that is not a UUID is an unknown space (404)."""
        return None if self.space_id is None else parse_space_id(self.space_id)

    def kinds(self) -> frozenset[SourceKind] | None:
        return self.source_kinds or None
