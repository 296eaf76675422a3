"""Build a FastAPI app from routers, with the one error body, the body size limit and the rate
limits (``http/ratelimit.py``) in front of every route."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import unquote_to_bytes

import psycopg
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from context_ledger.db.pool import is_unavailable
from context_ledger.errors import ApiError, ServiceUnavailableError, error_body
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
    parts = []
    for item in errors[:5]:
        where = ".".join(str(p) for p in item.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return 422, "validation_failed", "; ".join(parts)


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return _error(exc.status, exc.code, exc.message, exc.headers)


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
        dependencies=[Depends(request_quota(credential_limit))],
    )
    for router in routers:
        app.include_router(router)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(psycopg.OperationalError, _database_error)
    app.add_exception_handler(Exception, _unexpected_error)

    @app.middleware("http")
    async def refuse_bad_input(
        request: Request, call_next: Callable[[Request], Awaitable[JSONResponse]]
    ) -> JSONResponse:
        declared = request.headers.get("content-length")
        too_big = declared is not None and declared.isdigit() and int(declared) > max_body_bytes
        if too_big or len(await request.body()) > max_body_bytes:
            message = f"request body exceeds {max_body_bytes} bytes"
            return error_response(413, "payload_too_large", message)
        if not _valid_target(request.scope["path"], request.scope.get("query_string", b"")):
            message = "the path or query string is not valid UTF-8, or holds NUL"
            return error_response(400, "invalid_request", message)
        return await call_next(request)

    return app
