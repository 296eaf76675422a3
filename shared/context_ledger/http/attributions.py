"""Attribution records of retrievals: /api/v1/context/attributions and /attribution."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from pydantic import StringConstraints, field_validator

from context_ledger.attribution import lookup
from context_ledger.attribution.links import link_response
from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.evidence.keys import get_key_ring
from context_ledger.http.models import ApiModel, RequestModel
from context_ledger.http.principal import current_principal

router = APIRouter(prefix="/api/v1/context", tags=["attributions"])

Caller = Annotated[Principal, Depends(current_principal)]


class LinkRequest(RequestModel):
    response_id: Annotated[str, StringConstraints(min_length=1, max_length=256)]

    @field_validator("response_id")
    @classmethod
    def _encodable(cls, value: str) -> str:
        # The id goes into the canonical (UTF-8) evidence record; a lone surrogate cannot.
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError("must be valid Unicode text") from None
        return value


class LinkResponse(ApiModel):
    response_id: str
    created_at: datetime


class AttributionResponse(ApiModel):
    attribution_id: uuid.UUID
    request_id: str
    user_id: str
    space_id: uuid.UUID | None
    created_at: datetime
    sequence: int
    chain: str
    record: dict[str, Any]
    links: list[LinkResponse]

    @classmethod
    def of(cls, found: lookup.Attribution) -> AttributionResponse:
        return cls(
            attribution_id=found.attribution_id,
            request_id=found.request_id,
            user_id=found.user_id,
            space_id=found.space_id,
            created_at=found.created_at,
            sequence=found.seq,
            chain=found.chain,
            record=found.record,
            links=[
                LinkResponse(response_id=x.response_id, created_at=x.created_at)
                for x in found.links
            ],
        )


class RequestAttributionsResponse(ApiModel):
    request_id: str
    records: list[AttributionResponse]


@router.get(
    "/attributions/{request_id}",
    response_model=RequestAttributionsResponse,
    response_model_by_alias=True,
)
async def get_request_attributions(request_id: str, caller: Caller) -> RequestAttributionsResponse:
    request_id = lookup.parse_request_id(request_id)
    keys = get_key_ring()
    with connection() as conn:
        found = lookup.request_attributions(conn, caller, request_id, keys=keys)
    return RequestAttributionsResponse(
        request_id=request_id, records=[AttributionResponse.of(a) for a in found]
    )


@router.get(
    "/attribution/{attribution_id}",
    response_model=AttributionResponse,
    response_model_by_alias=True,
)
async def get_attribution(attribution_id: str, caller: Caller) -> AttributionResponse:
    parsed = lookup.parse_attribution_id(attribution_id)
    keys = get_key_ring()
    with connection() as conn:
        found = lookup.get_attribution(conn, caller, parsed, keys=keys)
    return AttributionResponse.of(found)


@router.post("/attributions/{attribution_id}/links", status_code=204, response_class=Response)
async def post_link(attribution_id: str, body: LinkRequest, caller: Caller) -> Response:
    parsed = lookup.parse_attribution_id(attribution_id)
    keys = get_key_ring()
    with connection() as conn:
        link_response(conn, caller, attribution_id=parsed, response_id=body.response_id, keys=keys)
    return Response(status_code=204)
