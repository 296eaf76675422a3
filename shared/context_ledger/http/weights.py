"""Level weights of the caller's organisation: /api/v1/context/weights."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field

from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.http.models import ApiModel, RequestModel
from context_ledger.http.principal import current_principal
from context_ledger.settings import get_settings
from context_ledger.spaces import weights

router = APIRouter(prefix="/api/v1/context/weights", tags=["weights"])

Caller = Annotated[Principal, Depends(current_principal)]


class PutWeightsRequest(RequestModel):
    """The organisation's new overrides; ``{}`` resets, like ``{"overrides": {}}`` (spec).

    Values stay as sent: ``spaces.weights.parse_overrides`` checks levels and weights, so that a
    boolean or a string is refused rather than coerced.
    """

    overrides: dict[str, Any] = Field(default_factory=dict)


class WeightsResponse(ApiModel):
    defaults: dict[str, float]
    overrides: dict[str, float]
    effective: dict[str, float]

    @classmethod
    def of(cls, found: weights.LevelWeights) -> WeightsResponse:
        return cls(defaults=found.defaults, overrides=found.overrides, effective=found.effective)


@router.get("", response_model=WeightsResponse, response_model_by_alias=True)
async def get_weights(caller: Caller) -> WeightsResponse:
    with connection() as conn:
        found = weights.get_weights(conn, caller, settings=get_settings())
    return WeightsResponse.of(found)


@router.put("", response_model=WeightsResponse, response_model_by_alias=True)
async def put_weights(body: PutWeightsRequest, caller: Caller) -> WeightsResponse:
    with connection() as conn:
        found = weights.replace_overrides(
            conn, caller, overrides=body.overrides, settings=get_settings()
        )
    return WeightsResponse.of(found)
