"""POST /api/v1/context/retrieve."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header
from pydantic import Field

from context_ledger.attribution.publisher import parse_client_header, publish_attribution
from context_ledger.auth.principal import Principal
from context_ledger.cooldown import Cooldown
from context_ledger.db import autocommit, connection, spare_connection
from context_ledger.embeddings.client import get_embeddings_client
from context_ledger.http.models import ApiModel
from context_ledger.http.principal import current_principal
from context_ledger.http.ratelimit import Quota, counted_by_route, route_quota
from context_ledger.retrieval.cache import SearchCache
from context_ledger.retrieval.query_vector import SearchMode
from context_ledger.retrieval.request import RetrieveRequest
from context_ledger.retrieval.service import DeliveredChunk, Dependencies, RetrieveAnswer, retrieve
from context_ledger.settings import get_settings
from context_ledger.sources.model import SourceKind
from context_ledger.spaces.levels import Level

router = APIRouter(tags=["retrieve"])

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
        publish=publish_attribution,
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
    events: list[dict[str, Any]] = []
    with connection() as conn, autocommit(conn):
        answer = retrieve(
            conn,
            caller,
            body,
            client_header=parse_client_header(x_keystone_client),
            deps=replace(deps, publish=events.append),
        )
    for event in events:
        deps.publish(event)
    return RetrieveResponse.of(answer)
