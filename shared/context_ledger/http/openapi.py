"""GET /api/v1/openapi.json: one OpenAPI document for every route of every function.

The document is FastAPI's ``openapi()`` of an app that includes every router of the registry
(``http/api.py``), completed with what FastAPI cannot see: the bearer credential every route
needs, and the error answers each operation can give, all in the one error body
(``{"error": {"code", "message"}}``; the embeddings endpoint answers OpenAI's error body). It is
served behind the authorizer like every other route: any valid credential reads it.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from context_ledger.auth.principal import Principal
from context_ledger.http import api
from context_ledger.http.app import create_app
from context_ledger.http.principal import current_principal

router = APIRouter(tags=["api"])

OPENAPI_PATH = "/api/v1/openapi.json"
ERROR_SCHEMA = "ErrorBody"
OPENAI_ERROR_SCHEMA = "OpenAIErrorBody"
#: API Gateway's own answer (``{"message": "Unauthorized"}``): a request without a credential
#: (401), one the authorizer refuses (403), a body over the HTTP API's 10 MB (413), the stage's
#: throttling (429, without ``Retry-After``).
GATEWAY_ERROR_SCHEMA = "GatewayErrorBody"
GATEWAY_STATUSES = frozenset({401, 403, 413, 429})

_SCHEMAS: dict[str, dict[str, Any]] = {
    ERROR_SCHEMA: {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            }
        },
    },
    GATEWAY_ERROR_SCHEMA: {
        "type": "object",
        "required": ["message"],
        "properties": {"message": {"type": "string"}},
    },
    OPENAI_ERROR_SCHEMA: {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": ["string", "null"]},
                },
            }
        },
    },
}

_DESCRIPTIONS = {
    400: "The body is not JSON, or a header breaks its rule",
    401: "No credential, or one that does not verify",
    403: "The caller lacks the permission, or the request names another organisation or user",
    404: "Unknown, another organisation's, or hidden from the caller",
    409: "Conflicts with the object's current state",
    413: "The body is over the endpoint's limit",
    422: "A field breaks a rule (the message names it); unknown fields too",
    429: (
        "Over a rate limit: the organisation's, the API key's, or (memory API) the credential's;"
        " Retry-After says when to retry"
    ),
    503: "A dependency the answer needs is down; nothing was delivered",
}

#: Errors beyond the ones every operation of its kind has (see ``_error_statuses``).
_EXTRA_ERRORS: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/api/v1/context/spaces"): (404,),  # parentId
    ("post", "/api/v1/context/retrieve"): (404, 503),  # spaceId; evidence, DLP, embeddings
    ("put", "/api/v1/context/sources/{source_id}/index"): (503,),
    ("post", "/api/v1/context/sources/{source_id}/index-versions/{version}/documents"): (
        409,
        503,
    ),
    ("post", "/api/v1/context/sources/{source_id}/index-versions/{version}/publish"): (409,),
    ("post", "/api/v1/context/sources/{source_id}/index-versions/{version}/abort"): (409,),
    ("put", "/api/v1/context/weights"): (404,),
    ("get", "/api/v1/context/weights"): (404,),
    ("post", "/api/v1/models/chat/completions"): (503,),
    ("post", "/api/v1/models/embeddings"): (503,),
    ("post", "/api/context/{project_id}"): (503,),
    ("post", "/api/context/{project_id}/batch"): (503,),
    ("patch", "/api/context/{project_id}/{memory_id}"): (503,),
    ("get", "/api/context/{project_id}/relevant"): (503,),
    ("post", "/api/context/{project_id}/{memory_id}/revisions/{revision}/accept"): (409, 503),
    ("post", "/api/v1/embeddings"): (503,),
    # projectId; the embeddings endpoint or a DLP scan
    ("post", "/api/v1/context/memories/reembed"): (404, 503),
}

_BODY_METHODS = frozenset({"post", "put", "patch"})

_RETRY_AFTER = {
    "Retry-After": {
        "description": (
            "Whole seconds until the next request will be admitted (the service's rate_limited"
            " answers; API Gateway's own throttling sends none)"
        ),
        "schema": {"type": "integer", "minimum": 1},
    }
}


def _error_statuses(method: str, path: str, operation: dict[str, Any]) -> set[int]:
    """Every operation: 401, 403 (a query naming another identity is refused anywhere) and 429
    (every route counts against the rate limits: ``http/ratelimit.py``)."""
    statuses = {401, 403, 429}
    if "{" in path:
        statuses.add(404)
    if operation.get("parameters") or "requestBody" in operation:
        statuses.add(422)
    if method in _BODY_METHODS:
        statuses |= {400, 413}
    return statuses | set(_EXTRA_ERRORS.get((method, path), ()))


def _complete(document: dict[str, Any]) -> dict[str, Any]:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(_SCHEMAS)
    # FastAPI documents its own 422 body; the service answers the one error body instead.
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    document["components"]["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "An RS256 access token of the identity provider, or an API key ctxl_...",
        }
    }
    document["security"] = [{"bearer": []}]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            schema = OPENAI_ERROR_SCHEMA if path == "/api/v1/embeddings" else ERROR_SCHEMA
            responses = operation.setdefault("responses", {})
            for status in sorted(_error_statuses(method, path, operation)):
                body = _ref(schema)
                if status in GATEWAY_STATUSES:
                    body = {"anyOf": [body, _ref(GATEWAY_ERROR_SCHEMA)]}
                responses[str(status)] = {
                    "description": _DESCRIPTIONS[status],
                    **({"headers": _RETRY_AFTER} if status == 429 else {}),
                    "content": {"application/json": {"schema": body}},
                }
    return document


def _ref(schema: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{schema}"}


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The whole HTTP API's OpenAPI document (built once per process)."""
    every_router = [r for function in api.FUNCTIONS for r in api.routers(function)]
    app = create_app(*every_router, title="Context Ledger")
    return _complete(app.openapi())


@router.get(OPENAPI_PATH)
async def get_openapi(_: Annotated[Principal, Depends(current_principal)]) -> JSONResponse:
    return JSONResponse(openapi_document())
