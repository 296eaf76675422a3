"""The Lambda authorizer of the HTTP API (payload 2.0, simple responses).

API Gateway answers 403 ``{"message":"Forbidden"}`` whenever an authorizer says no, and offers no
way to change that for HTTP APIs. The spec wants ``401`` with our error body for a bad credential,
so the authorizer lets the request through carrying ``authError`` instead of a principal, and the
application answers 401 (see ``http/principal.py``; docs/decisions.md). A missing Authorization
header never reaches us: API Gateway answers 401 itself.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools import Logger

from context_ledger.auth.api_keys import (
    is_well_formed_api_key,
    looks_like_api_key,
    principal_for_api_key,
)
from context_ledger.auth.jwt_verifier import JwtVerifier
from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.errors import UnauthorizedError
from context_ledger.settings import get_settings

logger = Logger(child=True)

AUTH_ERROR_KEY = "authError"


#: Why a JWT fails where no JWKS is configured (a stack deployed without ``JwksUrl``).
API_KEYS_ONLY = "this deployment accepts API keys only: no identity provider is configured"


@functools.cache
def _jwt_verifier(jwks_url: str) -> JwtVerifier:
    settings = get_settings()
    return JwtVerifier(
        jwks_url=jwks_url,
        issuer=settings.auth_issuer,
        audience=settings.auth_audience,
        leeway=settings.auth_leeway_seconds,
        cache_s=settings.jwks_cache_seconds,
    )


def bearer_token(headers: dict[str, str]) -> str:
    value = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError("expected 'Authorization: Bearer <token>'")
    return token.strip()


def verify_credential(token: str) -> Principal:
    """Verify a bearer credential (API key or JWT) or raise UnauthorizedError."""
    if looks_like_api_key(token):
        principal = None
        if is_well_formed_api_key(token):  # anything else is unknown without a connection
            with connection() as conn:
                principal = principal_for_api_key(conn, token)
        if principal is None:
            raise UnauthorizedError("unknown, revoked or expired API key")
        return principal
    jwks_url = get_settings().jwks_url
    if not jwks_url:
        raise UnauthorizedError(API_KEYS_ONLY)
    return _jwt_verifier(jwks_url).verify(token)


def authorize(event: dict[str, Any]) -> dict[str, Any]:
    """Simple response for API Gateway: a principal in the context, or an auth error."""
    try:
        principal = verify_credential(bearer_token(event.get("headers") or {}))
    except UnauthorizedError as exc:
        logger.info("credential refused", extra={"reason": exc.message})
        return {"isAuthorized": True, "context": {AUTH_ERROR_KEY: exc.message}}
    return {"isAuthorized": True, "context": principal.to_authorizer_context()}
