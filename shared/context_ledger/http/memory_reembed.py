"""Re-embedding on request: ``POST /api/v1/context/memories/reembed`` (memory/reembed.py).

The background job re-embeds after a model change on its own; this route is how an operator
hurries it and watches it (``context-ledger memories reembed``, which calls it until nothing
remains and shows a total and an ETA). Each call does a bounded share, so it answers within API
Gateway's 30 s: at most ``limit`` memories, and no new batch after :data:`CALL_SECONDS`.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import Field, StringConstraints

from context_ledger.auth.principal import Principal
from context_ledger.http.models import ApiModel, RequestModel
from context_ledger.http.principal import current_principal
from context_ledger.memory.embedding import memory_embedder
from context_ledger.memory.reembed import reembed_for
from context_ledger.settings import get_settings

router = APIRouter(prefix="/api/v1/context/memories", tags=["memory"])

DEFAULT_LIMIT = 64
MAX_LIMIT = 1000
#: No batch starts later than this into a call; one batch (32 memories, one request to the
#: endpoint) then still ends well inside API Gateway's 30 s.
CALL_SECONDS = 15.0

Caller = Annotated[Principal, Depends(current_principal)]


class ReembedRequest(RequestModel):
    project_id: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = Field(
        default=None,
        description="The project key (the memory API's project_id); absent: every project of "
        "the organisation (needs the context:admin scope)",
    )
    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT, strict=True)] = Field(
        default=DEFAULT_LIMIT, description="At most this many memories in this call"
    )


class ReembedResponse(ApiModel):
    reembedded: int = Field(description="Memories re-embedded by this call")
    remaining: int = Field(
        description="Memories still not embedded with the configured model (call again)"
    )
    withheld: int = Field(
        description="Memories the organisation's DLP policy keeps from the embeddings endpoint: "
        "never re-embedded"
    )
    model: str = Field(description="The configured model and its dimension")


@router.post("/reembed")
async def reembed_memories(body: ReembedRequest, caller: Caller) -> ReembedResponse:
    settings = get_settings()
    embedder = memory_embedder(settings)
    progress = reembed_for(
        caller,
        body.project_id,
        embedder=embedder,
        settings=settings,
        max_memories=body.limit,
        deadline=time.monotonic() + CALL_SECONDS,
    )
    return ReembedResponse(
        reembedded=progress.reembedded,
        remaining=progress.remaining,
        withheld=progress.withheld,
        model=embedder.label(),
    )
