"""POST /api/v1/embeddings: the in-deployment embeddings endpoint, in OpenAI's wire format.

It sits on the HTTP API behind the authorizer like every other route, and serves the deployment's
own functions: service principals only (a service API key, as the functions present it in
``KEYSTONE_CONTEXT_EMBEDDINGS_API_KEY``, or a token with ``principal_type`` ``service``). A person
is ``403 forbidden``: up to 2,048 inputs at about 0.5 s of CPU each is no endpoint for every
user's token (docs/decisions.md). Each input counts against the rate limits as one request.

Unlike the rest of the API it answers errors in OpenAI's shape (``{"error": {"message", "type",
"param", "code"}}``), because its callers are OpenAI clients; request handling itself is
``embeddings/wire.py``, shared with the local servers.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from context_ledger.auth.principal import Principal
from context_ledger.embeddings.serving import get_embeddings_service
from context_ledger.embeddings.wire import (
    InputError,
    embed,
    error_body,
    input_error_body,
    read_request,
)
from context_ledger.errors import ApiError, ForbiddenError
from context_ledger.http.app import create_app
from context_ledger.http.principal import current_principal
from context_ledger.http.ratelimit import Quota, counted_by_route, route_quota
from context_ledger.log import logger

#: Lambda's synchronous payload limit; larger bodies are refused before they are parsed.
MAX_BODY_BYTES = 6_000_000

router = APIRouter(tags=["embeddings"])

Caller = Annotated[Principal, Depends(current_principal)]


@router.post("/api/v1/embeddings")
@counted_by_route
async def create_embeddings(
    request: Request, caller: Caller, quota: Annotated[Quota, Depends(route_quota)]
) -> JSONResponse:
    if caller.is_person:
        quota.take()  # as on every route: over the limit is 429 before any permission's 403
        raise ForbiddenError(
            "this endpoint serves the deployment's services only: a service API key, or a"
            " token with principal_type service"
        )
    embeddings = read_request(await request.body())
    quota.take(cost=len(embeddings.texts))
    # The model is CPU-bound: keep it off the event loop.
    body = await run_in_threadpool(embed, embeddings, get_embeddings_service())
    return JSONResponse(body)


def _openai_error(
    status: int, message: str, code: str | None, headers: dict[str, str] | None = None
) -> JSONResponse:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    body = error_body(message, kind=kind, code=code)
    return JSONResponse(body, status_code=status, headers=headers)


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    # OpenAI clients know a refused credential by this code.
    code = "invalid_api_key" if exc.status == 401 else exc.code
    return _openai_error(exc.status, exc.message, code, exc.headers)


async def _input_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, InputError)
    return JSONResponse(input_error_body(exc), status_code=400)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    return _openai_error(exc.status_code, str(exc.detail), None)


async def _unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error")
    message = "The server had an error while processing your request."
    return _openai_error(500, message, None)


def create_embeddings_app() -> FastAPI:
    """The function's app: the route, and every error in OpenAI's shape."""
    app = create_app(
        router,
        max_body_bytes=MAX_BODY_BYTES,
        title="Context Ledger embeddings",
        error_response=lambda status, code, message: _openai_error(status, message, code),
    )
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
    return app
