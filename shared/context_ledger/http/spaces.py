"""Spaces and grants: /api/v1/context/spaces."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from pydantic import BeforeValidator, Field, StringConstraints, WithJsonSchema

from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.http.models import ApiModel, RequestModel
from context_ledger.http.principal import current_principal
from context_ledger.spaces import service
from context_ledger.spaces.levels import CREATABLE_LEVELS, Level
from context_ledger.spaces.permissions import Permission

router = APIRouter(prefix="/api/v1/context/spaces", tags=["spaces"])

Caller = Annotated[Principal, Depends(current_principal)]


def _strip(value: object) -> object:
    """Python's strip, as the service stores the name: pydantic's ``strip_whitespace`` keeps
    control characters such as ``\\x1f`` that ``str.strip`` removes (an empty name, refused by
    the database)."""
    return value.strip() if isinstance(value, str) else value


Name = Annotated[str, StringConstraints(min_length=1, max_length=200), BeforeValidator(_strip)]


def _creatable(level: object) -> object:
    """Before the enum's own check, so an unknown level is told the creatable ones only."""
    if level not in CREATABLE_LEVELS:
        raise ValueError(f"level must be one of {', '.join(CREATABLE_LEVELS)}")
    return level


CreatableLevel = Annotated[
    Level,
    BeforeValidator(_creatable),
    WithJsonSchema({"type": "string", "enum": [level.value for level in CREATABLE_LEVELS]}),
]


class CreateSpaceRequest(RequestModel):
    name: Name
    level: CreatableLevel
    parent_id: str | None = Field(default=None, max_length=64)


class GrantRequest(RequestModel):
    subject: Annotated[str, StringConstraints(min_length=1, max_length=210)]
    permissions: Annotated[list[Permission], Field(max_length=2)]


class SpaceResponse(ApiModel):
    id: uuid.UUID
    name: str
    level: Level
    parent_id: uuid.UUID | None
    key: str | None
    created_at: datetime
    permissions: list[Permission]

    @classmethod
    def of(cls, space: service.Space) -> SpaceResponse:
        return cls(
            id=space.id,
            name=space.name,
            level=space.level,
            parent_id=space.parent_id,
            key=space.key,
            created_at=space.created_at,
            permissions=sorted(space.permissions),
        )


class SpaceListResponse(ApiModel):
    spaces: list[SpaceResponse]


@router.post("", status_code=201, response_model=SpaceResponse, response_model_by_alias=True)
async def create_space(body: CreateSpaceRequest, caller: Caller) -> SpaceResponse:
    parent_id = service.parse_space_id(body.parent_id) if body.parent_id else None
    with connection() as conn:
        space = service.create_space(
            conn, caller, name=body.name, level=body.level, parent_id=parent_id
        )
    return SpaceResponse.of(space)


@router.get("", response_model=SpaceListResponse, response_model_by_alias=True)
async def list_spaces(caller: Caller) -> SpaceListResponse:
    with connection() as conn:
        spaces = service.list_spaces(conn, caller)
    return SpaceListResponse(spaces=[SpaceResponse.of(s) for s in spaces])


@router.get("/{space_id}", response_model=SpaceResponse, response_model_by_alias=True)
async def get_space(space_id: str, caller: Caller) -> SpaceResponse:
    with connection() as conn:
        space = service.get_space(conn, caller, service.parse_space_id(space_id))
    return SpaceResponse.of(space)


@router.put("/{space_id}/grants", status_code=204, response_class=Response)
async def put_grants(space_id: str, body: GrantRequest, caller: Caller) -> Response:
    with connection() as conn:
        service.set_grants(
            conn,
            caller,
            space_id=service.parse_space_id(space_id),
            subject=body.subject,
            permissions=list(dict.fromkeys(body.permissions)),
        )
    return Response(status_code=204)
