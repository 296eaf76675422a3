"""What this deployment serves: /api/v1/context/capabilities (any caller) and
/api/v1/context/status (organisation administrators).

Both describe configuration, so neither answer ever carries the embeddings URL, its host, a key or
an error's text: only whether an endpoint is configured and where it sits.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends

from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.embeddings.locality import Locality, locality
from context_ledger.errors import ForbiddenError
from context_ledger.http.models import ApiModel
from context_ledger.http.principal import current_principal
from context_ledger.retrieval import limits
from context_ledger.search.vectors import pgvector_available
from context_ledger.settings import SearchBackend, Settings, get_settings

router = APIRouter(prefix="/api/v1/context", tags=["context"])

Caller = Annotated[Principal, Depends(current_principal)]
SearchMode = Literal["full_text", "vector"]


class RetrievalCapabilities(ApiModel):
    served: bool
    default_token_budget: int
    max_token_budget: int
    default_max_per_level: int
    max_max_per_level: int
    search_modes: list[SearchMode]


class CapabilitiesResponse(ApiModel):
    retrieval: RetrievalCapabilities


class EmbeddingsStatus(ApiModel):
    configured: bool
    model: str | None
    dimensions: int | None
    locality: Locality


class StatusResponse(ApiModel):
    search_backend: SearchBackend
    pgvector_available: bool
    embeddings: EmbeddingsStatus


def _embeddings_configured(settings: Settings) -> bool:
    # Settings refuse a URL without a model, so the URL alone decides.
    return settings.embeddings_url is not None


@router.get("/capabilities", response_model=CapabilitiesResponse, response_model_by_alias=True)
async def get_capabilities(caller: Caller) -> CapabilitiesResponse:
    settings = get_settings()
    modes: list[SearchMode] = ["full_text"]
    if _embeddings_configured(settings):
        modes.append("vector")
    return CapabilitiesResponse(
        retrieval=RetrievalCapabilities(
            served=True,
            default_token_budget=limits.DEFAULT_TOKEN_BUDGET,
            max_token_budget=limits.MAX_TOKEN_BUDGET,
            default_max_per_level=limits.DEFAULT_MAX_PER_LEVEL,
            max_max_per_level=limits.MAX_MAX_PER_LEVEL,
            search_modes=modes,
        )
    )


@router.get("/status", response_model=StatusResponse, response_model_by_alias=True)
async def get_status(caller: Caller) -> StatusResponse:
    if not caller.is_context_admin:
        raise ForbiddenError("the context status needs the context:admin scope")
    settings = get_settings()
    with connection() as conn:
        available = pgvector_available(conn)
    configured = _embeddings_configured(settings)
    return StatusResponse(
        search_backend=settings.search_backend,
        pgvector_available=available,
        embeddings=EmbeddingsStatus(
            configured=configured,
            # Without an endpoint nothing is embedded, so no model is in use.
            model=settings.embeddings_model if configured else None,
            dimensions=settings.embeddings_dimensions if configured else None,
            locality=locality(settings),
        ),
    )
