"""The model gateway: /api/v1/models (OpenAI-compatible chat completions and embeddings, and the
model call logs)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from context_ledger.attribution.lookup import REQUEST_ID
from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.errors import ValidationFailedError
from context_ledger.evidence.listing import DEFAULT_LIMIT, InvalidCursorError, Position
from context_ledger.http.models import ApiModel
from context_ledger.http.principal import current_principal
from context_ledger.model_gateway.calls import LoggedCall, list_calls
from context_ledger.model_gateway.headers import (
    CLIENT,
    CONTEXT_REQUEST_ID,
    METADATA,
    parse_gateway_headers,
)
from context_ledger.model_gateway.provider import Endpoint, get_provider
from context_ledger.model_gateway.service import CallRequest, GatewayService, StreamedAnswer
from context_ledger.settings import get_settings

router = APIRouter(prefix="/api/v1/models", tags=["models"])

Caller = Annotated[Principal, Depends(current_principal)]

#: Prompts can be long; Lambda takes request payloads up to 6 MB.
MAX_BODY_BYTES = 6_000_000


async def _forward(request: Request, caller: Principal, endpoint: Endpoint) -> Response:
    # Every check runs before the provider is contacted: a bad header or body sends nothing.
    headers = parse_gateway_headers(
        {name: request.headers.getlist(name) for name in (CONTEXT_REQUEST_ID, METADATA, CLIENT)}
    )
    call = CallRequest.of(caller, endpoint, await request.body(), headers)
    service = GatewayService(get_provider(), wait_ms=get_settings().models_context_link_wait_ms)
    answer = await run_in_threadpool(service.call, call)
    if isinstance(answer, StreamedAnswer):
        return StreamingResponse(answer.chunks, status_code=answer.status, headers=answer.headers)
    return Response(answer.body, status_code=answer.status, headers=answer.headers)


@router.post("/chat/completions")
async def chat_completions(request: Request, caller: Caller) -> Response:
    return await _forward(request, caller, Endpoint.CHAT_COMPLETIONS)


@router.post("/embeddings")
async def embeddings(request: Request, caller: Caller) -> Response:
    return await _forward(request, caller, Endpoint.EMBEDDINGS)


class TokenUsageResponse(ApiModel):
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


class ModelCallResponse(ApiModel):
    gateway_request_id: uuid.UUID
    user_id: str
    client_id: str | None
    client_name: str | None
    client_version: str | None
    endpoint: str
    model: str | None
    stream: bool
    status: int
    latency_ms: int
    usage: TokenUsageResponse | None
    context_request_id: str | None
    context_link: str | None
    link_latency_ms: int | None
    created_at: datetime

    @classmethod
    def of(cls, logged: LoggedCall) -> ModelCallResponse:
        call = logged.call
        usage = call.usage
        return cls(
            gateway_request_id=call.gateway_request_id,
            user_id=call.user_id,
            client_id=call.client_id,
            client_name=call.client_name,
            client_version=call.client_version,
            endpoint=call.endpoint.value,
            model=call.model,
            stream=call.stream,
            status=call.status,
            latency_ms=call.latency_ms,
            usage=None
            if usage is None
            else TokenUsageResponse(
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                total_tokens=usage.total_tokens,
            ),
            context_request_id=call.context_request_id,
            context_link=None if call.link_outcome is None else call.link_outcome.value,
            link_latency_ms=call.link_latency_ms,
            created_at=logged.created_at,
        )


class ModelLogsResponse(ApiModel):
    calls: list[ModelCallResponse]
    next_cursor: str | None


@router.get("/logs", response_model=ModelLogsResponse, response_model_by_alias=True)
async def model_logs(
    caller: Caller,
    context_request_id: Annotated[str | None, Query(pattern=REQUEST_ID.pattern)] = None,
    limit: Annotated[int, Query(ge=1)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> ModelLogsResponse:
    try:
        after = None if cursor is None else Position.decode(cursor)
    except InvalidCursorError as exc:
        raise ValidationFailedError(f"cursor: {exc}") from None
    with connection() as conn:
        page = list_calls(
            conn, caller, context_request_id=context_request_id, limit=limit, after=after
        )
    return ModelLogsResponse(
        calls=[ModelCallResponse.of(c) for c in page.calls],
        next_cursor=None if page.next_position is None else page.next_position.encode(),
    )
