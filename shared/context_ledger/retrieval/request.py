"""The retrieve request: fields, defaults and the spec's rules."""

from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import Field, StringConstraints, field_validator

from context_ledger.http.models import RequestModel
from context_ledger.retrieval.limits import (
    DEFAULT_MAX_PER_LEVEL,
    DEFAULT_TOKEN_BUDGET,
    MAX_MAX_PER_LEVEL,
    MAX_TOKEN_BUDGET,
)
from context_ledger.sources.model import SourceKind
from context_ledger.spaces.service import parse_space_id

OptionalId = Annotated[str, StringConstraints(max_length=128)] | None


class RetrieveRequest(RequestModel):
    """``POST /api/v1/context/retrieve``. Out-of-range budgets are lowered, not refused (spec)."""

    query: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=8000)]
    space_id: str | None = Field(default=None, max_length=64)
    token_budget: Annotated[int, Field(ge=0, strict=True)] = DEFAULT_TOKEN_BUDGET
    max_per_level: Annotated[int, Field(ge=1, strict=True)] = DEFAULT_MAX_PER_LEVEL
    lens_id: OptionalId = None
    session_id: OptionalId = None
    exclude_related: Annotated[bool, Field(strict=True)] = False
    source_kinds: Annotated[list[SourceKind], Field(max_length=16)] | None = None

    @field_validator("token_budget")
    @classmethod
    def _lower_budget(cls, value: int) -> int:
        return min(value, MAX_TOKEN_BUDGET)

    @field_validator("max_per_level")
    @classmethod
    def _lower_per_level(cls, value: int) -> int:
        return min(value, MAX_MAX_PER_LEVEL)

    @field_validator("space_id", "lens_id", "session_id")
    @classmethod
    def _empty_is_absent(cls, value: str | None) -> str | None:
        return value or None

    def space_uuid(self) -> uuid.UUID | None:
        """The space to start from; a value that is not a UUID is an unknown space (404)."""
        return parse_space_id(self.space_id) if self.space_id else None

    def kinds(self) -> frozenset[SourceKind] | None:
        return frozenset(self.source_kinds) if self.source_kinds else None
