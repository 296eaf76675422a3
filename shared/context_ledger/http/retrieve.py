"""POST /api/v1/context/retrieve: the request's fields, defaults and the spec's rules, then the
use case (``retrieval/service.py``) and its evidence record queued."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header
from pydantic import Field, JsonValue, StringConstraints, WithJsonSchema, field_validator

from context_ledger.attribution.publisher import parse_client_header, publish_attribution
from context_ledger.auth.principal import Principal
from context_ledger.cooldown import Cooldown
from context_ledger.db import autocommit, connection, spare_connection
from context_ledger.dlp.texts import holds_credential
from context_ledger.embeddings.client import get_embeddings_client
from context_ledger.http.models import ApiModel, RequestModel
from context_ledger.http.principal import current_principal
from context_ledger.http.ratelimit import Quota, counted_by_route, route_quota
from context_ledger.retrieval.cache import SearchCache
from context_ledger.retrieval.limits import (
    DEFAULT_MAX_PER_LEVEL,
    DEFAULT_TOKEN_BUDGET,
    MAX_MAX_PER_LEVEL,
    MAX_TOKEN_BUDGET,
)
from context_ledger.retrieval.query import RetrieveQuery
from context_ledger.retrieval.query_vector import SearchMode
from context_ledger.retrieval.service import DeliveredChunk, Dependencies, RetrieveAnswer, retrieve
from context_ledger.settings import get_settings
from context_ledger.sources.model import SourceKind
from context_ledger.spaces.levels import Level

router = APIRouter(tags=["retrieve"])

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
        if value and holds_credential(value, random=False):
            # The evidence chain keeps what it records for good, for every reader of it.
            raise ValueError("must name a lens or session, not hold a credential (it is recorded)")
        return value or None

    @field_validator("space_id")
    @classmethod
    def _empty_space_is_absent(cls, value: JsonValue) -> JsonValue:
        # Only "" and null: 0, false, [] and {} are values that are not UUIDs (404).
        return None if value == "" else value

    def to_query(self) -> RetrieveQuery:
        """The use case's input: the fields as validated and lowered here."""
        return RetrieveQuery(
            query=self.query,
            space_id=self.space_id,
            token_budget=self.token_budget,
            max_per_level=self.max_per_level,
            lens_id=self.lens_id,
            session_id=self.session_id,
            exclude_related=self.exclude_related,
            source_kinds=frozenset(self.source_kinds) if self.source_kinds else None,
        )


#: One per process: a warm Lambda container keeps its search cache between requests, and skips
#: an embeddings endpoint that just failed for the cooldown.
_CACHE = SearchCache()
_COOLDOWN = Cooldown()

Caller = Annotated[Principal, Depends(current_principal)]


class ChunkResponse(ApiModel):
    id: uuid.UUID
    source_id: uuid.UUID
    space_id: uuid.UUID
    level: Level
    kind: SourceKind
    path: str
    title: str | None
    content: str
    score: float
    tokens: int
    metadata: dict[str, Any]

    @classmethod
    def of(cls, chunk: DeliveredChunk) -> ChunkResponse:
        row = chunk.row
        metadata = {
            **row["metadata"],
            "language": row["language"],
            "symbol": row["symbol"],
            "startLine": row["start_line"],
            "endLine": row["end_line"],
        }
        if chunk.related_to is not None:
            metadata["relatedTo"] = str(chunk.related_to)
            metadata["relatedRelation"] = chunk.related_relation
        headings = row["metadata"].get("headings") or []
        return cls(
            id=row["id"],
            source_id=chunk.source.id,
            space_id=chunk.source.space_id,
            level=chunk.level,
            kind=chunk.source.kind,
            path=row["path"],
            title=row["symbol"] or (headings[-1] if headings else None),
            content=row["content"],
            score=round(chunk.score, 4),
            tokens=chunk.tokens,
            metadata=metadata,
        )


class SourceSummary(ApiModel):
    id: uuid.UUID
    name: str
    kind: SourceKind
    chunks: int
    tokens: int


class RetrieveResponse(ApiModel):
    chunks: list[ChunkResponse]
    sources_summary: list[SourceSummary]
    tokens_used: int
    attribution_id: uuid.UUID
    request_id: str
    search_mode: SearchMode = Field(
        description="`hybrid` (vector and full-text) or `full_text` (no embeddings endpoint "
        "configured, or it did not answer in time: see `warnings`)"
    )
    warnings: list[str] = Field(
        default_factory=list, description="What made this answer less than it could be"
    )

    @classmethod
    def of(cls, answer: RetrieveAnswer) -> RetrieveResponse:
        summary: dict[uuid.UUID, SourceSummary] = {}
        for chunk in answer.chunks:
            source = chunk.source
            entry = summary.setdefault(
                source.id,
                SourceSummary(id=source.id, name=source.name, kind=source.kind, chunks=0, tokens=0),
            )
            entry.chunks += 1
            entry.tokens += chunk.tokens
        return cls(
            chunks=[ChunkResponse.of(c) for c in answer.chunks],
            sources_summary=list(summary.values()),
            tokens_used=answer.tokens_used,
            attribution_id=answer.attribution_id,
            request_id=answer.request_id,
            search_mode=answer.search_mode,
            warnings=list(answer.warnings),
        )


async def dependencies(quota: Annotated[Quota, Depends(route_quota)]) -> Dependencies:
    return Dependencies(
        settings=get_settings(),
        cache=_CACHE,
        cooldown=_COOLDOWN,
        side_connection=spare_connection,
        embedder=get_embeddings_client(),
        count_request=quota.send,
    )


@router.post("/api/v1/context/retrieve", response_model=RetrieveResponse)
@counted_by_route
async def retrieve_context(
    body: RetrieveRequest,
    caller: Caller,
    deps: Annotated[Dependencies, Depends(dependencies)],
    x_keystone_client: Annotated[str | None, Header()] = None,
) -> RetrieveResponse:
    # Reads only, each statement seeing what was committed when it started (as in a READ
    # COMMITTED transaction): in autocommit mode they cost no BEGIN and COMMIT round trips
    # (0.57 ms a retrieval, paired A/B in docs/decisions.md). The attribution event is queued
    # once every read has succeeded: evidence of an answer never delivered must not exist.
    with connection() as conn, autocommit(conn):
        answer = retrieve(
            conn,
            caller,
            body.to_query(),
            client_header=parse_client_header(x_keystone_client),
            deps=deps,
        )
    publish_attribution(answer.event)
    return RetrieveResponse.of(answer)
