"""The retrieve request: fields, defaults and the spec's rules."""

from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import Field, JsonValue, StringConstraints, WithJsonSchema, field_validator

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

#: Any JSON value: whatever is not a UUID is an unknown space, ``404 context.space.not_found``
#: (spec), never a 422 for its length or type. The document still says what a space id is.
SpaceId = Annotated[
    JsonValue,
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "uuid"},
                {"type": "string", "maxLength": 0},
                {"type": "null"},
            ],
            "description": "The space to start from; empty or absent: the organisation chain. "
            "Any value that is not a UUID of a space the caller can see is "
            "`404 context.space.not_found`.",
        }
    ),
]


class RetrieveRequest(RequestModel):
    """``POST /api/v1/context/retrieve``. Out-of-range budgets are lowered, not refused (spec)."""

    query: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=8000)]
    space_id: SpaceId = None
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

    @field_validator("lens_id", "session_id")
    @classmethod
    def _empty_is_absent(cls, value: str | None) -> str | None:
        return value or None

    @field_validator("space_id")
    @classmethod
    def _empty_space_is_absent(cls, value: JsonValue) -> JsonValue:
        # Only "" and null: 0, false, [] and {} are values that are not UUIDs (404).
        return None if value == "" else value

    def space_uuid(self) -> uuid.UUID | None:
        """The space to start from; a value that is not a UUID is an unknown space (404)."""
        return None if self.space_id is None else parse_space_id(self.space_id)

    def kinds(self) -> frozenset[SourceKind] | None:
        return frozenset(self.source_kinds) if self.source_kinds else None
