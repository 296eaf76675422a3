"""Which routers each Lambda function serves: the one registry of the HTTP API.

``functions/<folder>/app.py`` builds its app from its entry here, and the OpenAPI document
(``http/openapi.py``) is the union of every entry, so a route cannot be served without being
documented. Routers are named by module (``context_ledger.http.<module>.router``) and imported
only when a function's app is built: a function's cold start loads its own routers, not all. A
module that takes bulk content declares its body limit beside its routes (``MAX_BODY_BYTES``), and
one whose spec has a per-credential rate limit declares it there too (``credential_rate_limit``,
counted with the organisation's and the API key's: ``http/ratelimit.py``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fastapi import APIRouter, FastAPI

from context_ledger.http.app import DEFAULT_MAX_BODY_BYTES, create_app
from context_ledger.http.ratelimit import CredentialLimit

#: Modules of ``context_ledger.http`` whose routers each function serves, keyed by the
#: function's folder under functions/ (its CodeUri in template.yaml).
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "spaces": ("spaces",),
    "sources": ("sources",),
    "retrieve": ("retrieve",),
    "attributions": ("attributions",),
    "context_admin": ("weights", "dlp", "capabilities", "openapi"),
    "observability": ("observability",),
    "memory": ("memory", "memory_reembed"),
    "model_gateway": ("model_gateway",),
    # Its app answers errors in OpenAI's shape: http.embeddings.create_embeddings_app.
    "embeddings": ("embeddings",),
}


#: Functions on the HTTP API that speak another protocol than this REST API, so are not built from
#: routers and not in the OpenAPI document: the MCP server (streamable HTTP, JSON-RPC; its
#: contract is MCP's, docs/mcp.md).
OTHER_PROTOCOLS: frozenset[str] = frozenset({"mcp"})


def _modules(function: str) -> list[ModuleType]:
    return [importlib.import_module(f"context_ledger.http.{m}") for m in FUNCTIONS[function]]


def routers(function: str) -> list[APIRouter]:
    """The routers ``function`` serves, in registry order."""
    return [module.router for module in _modules(function)]


def max_body_bytes(function: str) -> int:
    """The largest body any of the function's modules takes (1 MB unless one declares more)."""
    return max(getattr(m, "MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES) for m in _modules(function))


def credential_limit(function: str) -> CredentialLimit | None:
    """The per-credential rate limit the function's module declares, if one does."""
    declared = (getattr(m, "credential_rate_limit", None) for m in _modules(function))
    return next((limit for limit in declared if limit is not None), None)


def function_app(function: str) -> FastAPI:
    """The FastAPI app of one function, with the shared error body, its body limit and its
    rate limits."""
    return create_app(
        *routers(function),
        max_body_bytes=max_body_bytes(function),
        credential_limit=credential_limit(function),
    )
