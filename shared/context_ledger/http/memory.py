"""The memory API (spec: memory-relevant-api): /api/context/{project_id}[...].

Bodies and answers are snake_case, timestamps float epoch seconds, as the spec shows; errors are
the service's one error body. Besides the organisation's and API key's limits every route has,
each counts against the spec's per-credential limit (``credential_rate_limit``, applied with the
others by ``http/ratelimit.py``, after the credential is verified: a bad credential is 401, never
429).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.dlp.texts import holds_credential
from context_ledger.errors import ValidationFailedError
from context_ledger.http.models import RequestModel
from context_ledger.http.principal import current_principal
from context_ledger.memory import service
from context_ledger.memory.embedding import memory_embedder
from context_ledger.memory.model import (
    AGENT_KEY,
    DEFAULT_CONFIDENCE,
    DEFAULT_IMPORTANCE,
    MAX_CONTENT_CHARS,
    MAX_METADATA_BYTES,
    MemoryType,
)
from context_ledger.memory.vector_cache import VectorCache
from context_ledger.settings import Settings, get_settings

router = APIRouter(prefix="/api/context", tags=["memory"])

#: Memories per batch write (``POST /api/context/{project_id}/batch``).
MAX_BATCH = 100
#: A full batch: 100 x (32,000 characters + 16 KB of metadata) is about 4.8 MB of ASCII JSON.
#: 6 MB is Lambda's synchronous payload limit, which the other bulk routes take too.
MAX_BODY_BYTES = 6_000_000

#: The list endpoint's page size: default, and the cap larger values are lowered to.
LIST_DEFAULT_LIMIT = 50
LIST_MAX_LIMIT = 200
RELEVANT_DEFAULT_LIMIT = 5
MAX_QUERY_CHARS = 8000

Unit = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False, strict=True)]
Content = Annotated[str, StringConstraints(min_length=1, max_length=MAX_CONTENT_CHARS)]


def _not_a_credential(value: str) -> str:
    if holds_credential(value):
        raise ValueError("must name an agent, not hold a credential (it is delivered as written)")
    return value


AgentKey = Annotated[
    str, StringConstraints(pattern=AGENT_KEY.pattern), AfterValidator(_not_a_credential)
]


def credential_rate_limit(settings: Settings) -> int:
    """The spec's limit, read by http/api.py: requests per minute per API key (tokens: per user
    and client)."""
    return settings.memory_rate_limit_per_minute


Caller = Annotated[Principal, Depends(current_principal)]


#: One per process: a warm Lambda container keeps the memory vectors it has read.
_VECTOR_CACHE = VectorCache()


async def dependencies() -> service.Dependencies:
    settings = get_settings()
    return service.Dependencies(
        settings=settings, embedder=memory_embedder(settings), vector_cache=_VECTOR_CACHE
    )


Deps = Annotated[service.Dependencies, Depends(dependencies)]


class MemoryRequest(RequestModel):
    """Memory bodies use the spec's snake_case names; unknown fields are refused."""

    model_config = ConfigDict(alias_generator=None, populate_by_name=True, extra="forbid")

    @field_validator("content", check_fields=False)
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("metadata", check_fields=False)
    @classmethod
    def _small_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        # allow_nan=False: Python's JSON parser takes NaN and Infinity, JSON (and jsonb) do not
        if (
            len(json.dumps(value, ensure_ascii=False, allow_nan=False).encode())
            > MAX_METADATA_BYTES
        ):
            raise ValueError(f"must be at most {MAX_METADATA_BYTES} bytes of JSON")
        return value


class CreateMemory(MemoryRequest):
    content: Content
    type: MemoryType = MemoryType.FACT
    agent_key: AgentKey | None = None
    confidence: Unit = DEFAULT_CONFIDENCE
    importance: Unit = DEFAULT_IMPORTANCE
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: opt-in: a live memory of the same type with the same normalised content answers instead
    dedupe: Annotated[bool, Field(strict=True)] = False

    def item(self) -> service.NewMemory:
        fields = self.model_dump(include=set(service.REVISION_FIELDS), mode="json")
        return service.NewMemory(fields=fields, agent_key=self.agent_key, dedupe=self.dedupe)


class CreateMemories(MemoryRequest):
    """A batch: each item is a single write's body, validated as one (a bad item is named by its
    position, ``memories.3.content: ...``)."""

    memories: Annotated[list[CreateMemory], Field(min_length=1, max_length=MAX_BATCH)]


class ReviewSetting(MemoryRequest):
    required: Annotated[bool, Field(strict=True)]


class PatchMemory(MemoryRequest):
    """Fields to change; an absent field keeps its value, and ``null`` is not a value."""

    content: Content | None = None
    type: MemoryType | None = None
    confidence: Unit | None = None
    importance: Unit | None = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            nulls = sorted(name for name, value in data.items() if value is None)
            if nulls:
                raise ValueError(f"{', '.join(nulls)}: null is not a value; leave the field out")
        return data

    def changes(self) -> dict[str, Any]:
        return self.model_dump(include=self.model_fields_set, mode="json")


def _written(
    written: service.Written, project_id: str, *, created: bool, dedupe: bool = False
) -> JSONResponse:
    """The memory as served (201 new, 200 changed or a duplicate), or 202 with the revision
    awaiting review. A write that asked for ``dedupe`` is told ``duplicate`` either way."""
    told = {"duplicate": written.duplicate} if dedupe else {}
    if written.memory is None:
        pending = {
            "id": written.memory_id,
            "project_id": project_id,
            "revision": written.revision,
            "state": "pending",
        }
        return JSONResponse(pending | told, status_code=202)
    status = 201 if created and not written.duplicate else 200
    return JSONResponse(written.memory.to_wire() | told, status_code=status)


@router.post("/{project_id}", status_code=201)
async def create_memory(
    project_id: str, body: CreateMemory, caller: Caller, deps: Deps
) -> JSONResponse:
    with connection() as conn:
        written = service.create_memory(conn, caller, project_id, item=body.item(), deps=deps)
    return _written(written, project_id, created=True, dedupe=body.dedupe)


@router.post("/{project_id}/batch", status_code=201)
async def create_memories(
    project_id: str, body: CreateMemories, caller: Caller, deps: Deps
) -> JSONResponse:
    """All the memories or none, in one transaction; ``ids`` in the items' order. The status is
    what a single write of the same items would answer: 202 when any waits for review, else 201
    when any was created, else (every item a duplicate) 200."""
    items = [memory.item() for memory in body.memories]
    with connection() as conn:
        written = service.create_memories(conn, caller, project_id, items=items, deps=deps)
    if written.pending:
        status = 202
    elif len(written.duplicates) < len(written.ids):
        status = 201
    else:
        status = 200
    answer = {
        "project_id": project_id,
        "ids": written.ids,
        "duplicates": written.duplicates,
        "pending": written.pending,
    }
    return JSONResponse(answer, status_code=status)


@router.put("/{project_id}/review")
async def set_review(project_id: str, body: ReviewSetting, caller: Caller) -> dict:
    with connection() as conn:
        service.set_review_required(conn, caller, project_id, required=body.required)
    return {"project_id": project_id, "review_required": body.required}


@router.get("/{project_id}")
async def list_memories(
    project_id: str,
    caller: Caller,
    type: MemoryType | None = None,
    agent: Annotated[str | None, Query(max_length=128)] = None,
    q: Annotated[str | None, Query(min_length=1, max_length=MAX_QUERY_CHARS)] = None,
    limit: Annotated[int, Query(ge=1)] = LIST_DEFAULT_LIMIT,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict:
    with connection() as conn:
        memories = service.list_memories(
            conn,
            caller,
            project_id,
            type=type.value if type else None,
            agent=agent,
            q=q,
            limit=min(limit, LIST_MAX_LIMIT),
            offset=offset,
        )
    return {"project_id": project_id, "memories": [m.to_wire() for m in memories]}


@router.get("/{project_id}/relevant")
async def relevant_memories(
    project_id: str,
    caller: Caller,
    deps: Deps,
    query: Annotated[str, Query(max_length=MAX_QUERY_CHARS)] = "",
    limit: Annotated[int, Query(ge=1)] = RELEVANT_DEFAULT_LIMIT,
    min_score: Annotated[float | None, Query(ge=0, le=1)] = None,
    token_budget: Annotated[int | None, Query(ge=1)] = None,
) -> dict:
    with connection() as conn:
        answer = service.relevant_memories(
            conn,
            caller,
            project_id,
            query=query,
            limit=limit,
            min_score=min_score,
            token_budget=token_budget,
            deps=deps,
        )
    body: dict[str, Any] = {
        "project_id": project_id,
        "query": answer.query,
        "memories": [m.to_wire() for m in answer.memories],
    }
    if answer.tokens_used is not None:
        body["tokens_used"] = answer.tokens_used
    if answer.warnings:  # only then: the spec's answer has three fields
        body["warnings"] = list(answer.warnings)
    return body


# After /relevant: a route declared earlier wins, and "relevant" is no memory id.
@router.get("/{project_id}/{memory_id}")
async def get_memory(project_id: str, memory_id: str, caller: Caller) -> dict:
    memory_id = service.parse_memory_id(memory_id)
    with connection() as conn:
        memory = service.get_memory(conn, caller, project_id, memory_id)
    return memory.to_wire()


@router.patch("/{project_id}/{memory_id}")
async def update_memory(
    project_id: str, memory_id: str, body: PatchMemory, caller: Caller, deps: Deps
) -> JSONResponse:
    changes = body.changes()
    if not changes:
        raise ValidationFailedError("body: name at least one field to change")
    memory_id = service.parse_memory_id(memory_id)
    with connection() as conn:
        written = service.update_memory(
            conn, caller, project_id, memory_id, changes=changes, deps=deps
        )
    return _written(written, project_id, created=False)


@router.post("/{project_id}/{memory_id}/revisions/{revision}/accept")
async def accept_revision(
    project_id: str, memory_id: str, revision: str, caller: Caller, deps: Deps
) -> dict:
    memory_id = service.parse_memory_id(memory_id)
    number = service.parse_revision(revision)
    with connection() as conn:
        memory = service.accept_revision(conn, caller, project_id, memory_id, number, deps=deps)
    return memory.to_wire()


@router.delete("/{project_id}/{memory_id}", status_code=204)
async def delete_memory(project_id: str, memory_id: str, caller: Caller) -> Response:
    memory_id = service.parse_memory_id(memory_id)
    with connection() as conn:
        service.delete_memory(conn, caller, project_id, memory_id)
    return Response(status_code=204)


@router.post("/{project_id}/{memory_id}/access")
async def record_access(project_id: str, memory_id: str, caller: Caller) -> dict:
    memory_id = service.parse_memory_id(memory_id)
    with connection() as conn:
        memory = service.record_access(conn, caller, project_id, memory_id)
    return memory.to_wire()


@router.get("/{project_id}/{memory_id}/revisions")
async def memory_revisions(project_id: str, memory_id: str, caller: Caller) -> dict:
    memory_id = service.parse_memory_id(memory_id)
    with connection() as conn:
        revisions = service.memory_revisions(conn, caller, project_id, memory_id)
    return {"id": memory_id, "revisions": [r.to_wire() for r in revisions]}
