"""Build a FastAPI app from routers, with the one error body, the body size limit and the rate
limits (``http/ratelimit.py``) in front of every route.

Every route and dependency is ``async def`` although it blocks (database, queue, HTTP): a Lambda
environment serves one request at a time and the local runtime gives each request a thread and
event loop of its own, so nothing else waits on the loop. A plain ``def`` would run in Starlette's
thread pool, which Mangum's per-invocation task starts afresh: about 1 ms a request in thread
hand-offs (docs/decisions.md). ``tests/unit/test_http_routes_async.py`` keeps it so."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

import psycopg
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from context_ledger.db.pool import is_unavailable
from context_ledger.dlp.texts import echoed
from context_ledger.errors import (
    ApiError,
    ServiceUnavailableError,
    ValidationFailedError,
    error_body,
    validation_message,
)
from context_ledger.http.body import ClientGone, read_body, replay
from context_ledger.http.ratelimit import CredentialLimit, request_quota
from context_ledger.log import logger

#: Default request body limit; endpoints that take bulk content raise it for their function.
DEFAULT_MAX_BODY_BYTES = 1_000_000

_STARLETTE_CODES = {
    400: "invalid_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
}

#: Builds an error answer from (status, code, message): the service's body unless an app answers
#: in another shape (the embeddings endpoint's OpenAI body).
ErrorResponse = Callable[[int, str, str], JSONResponse]


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


def _describe_validation(exc: RequestValidationError) -> tuple[int, str, str]:
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return 400, "invalid_request", "request body is not valid JSON"
    if any(_unparsed_body(e) for e in errors):
        # FastAPI reads a body as JSON only under a JSON media type; otherwise it hands the
        # model the raw bytes, which pydantic calls "not a valid dictionary".
        return 400, "invalid_request", "request body is not JSON: send it as application/json"
    return 422, ValidationFailedError.code, echoed(validation_message(errors))


def _unparsed_body(error: Mapping[str, Any]) -> bool:
    return tuple(error.get("loc", ())) == ("body",) and isinstance(
        error.get("input"), bytes | bytearray
    )


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    # A rule's message may name what the caller wrote (a policy's key, a pattern's name or text).
    message = echoed(exc.message) if isinstance(exc, ValidationFailedError) else exc.message
    return _error(exc.status, exc.code, message, exc.headers)


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return _error(*_describe_validation(exc))


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _STARLETTE_CODES.get(exc.status_code, "http_error")
    return _error(exc.status_code, code, str(exc.detail))


async def _unexpected_error(_: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error")
    return _error(500, "internal_error", "internal error; the request id is in the logs")


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    """The database unreachable (down, restarting, no connection in time): a 503 to retry."""
    if not is_unavailable(exc):
        return await _unexpected_error(request, exc)
    logger.warning("database unavailable", extra={"error": type(exc).__name__})
    return _error(503, ServiceUnavailableError.code, "the database is unavailable; retry shortly")


def _valid_target(path: str, query_string: bytes) -> bool:
    """Valid UTF-8 without NUL characters: Starlette would read invalid UTF-8 in a query value
    as U+FFFD and carry on, and PostgreSQL refuses NUL in text."""
    try:
        query = unquote_to_bytes(query_string).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return "\x00" not in query and "\x00" not in path


def create_app(
    *routers: APIRouter,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    title: str = "Context Ledger",
    error_response: ErrorResponse = _error,
    credential_limit: CredentialLimit | None = None,
) -> FastAPI:
    app = FastAPI(
        title=title,
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(request_quota(credential_limit), scope="function")],
    )
    for router in routers:
        app.include_router(router)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(psycopg.OperationalError, _database_error)
    app.add_exception_handler(Exception, _unexpected_error)

    app.add_middleware(RefuseBadInput, max_body_bytes=max_body_bytes, error_response=error_response)
    return app


class RefuseBadInput:
    """``413 payload_too_large`` for a body over ``max_body_bytes`` (declared or sent), then
    ``400 invalid_request`` for a path or query string that is not valid UTF-8 or holds NUL;
    otherwise the request goes on with its body replayed.

    Plain ASGI rather than ``@app.middleware("http")``: Starlette's BaseHTTPMiddleware puts a
    task group and a memory stream around every request, about 0.25 ms here.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, error_response: ErrorResponse):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.error_response = error_response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        too_big = (
            declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes
        )
        try:
            body = None if too_big else await read_body(receive, self.max_body_bytes)
        except ClientGone:
            return  # nobody to answer, and half a body must not reach the app
        if body is None:
            message = f"request body exceeds {self.max_body_bytes} bytes"
            refusal = self.error_response(413, "payload_too_large", message)
        elif not _valid_target(scope["path"], scope.get("query_string", b"")):
            message = "the path or query string is not valid UTF-8, or holds NUL"
            refusal = self.error_response(400, "invalid_request", message)
        else:
            await self.app(scope, replay(body, receive), send)
            return
        await refusal(scope, receive, send)
