"""The caller, from the authorizer context only; requests naming another identity are refused."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import Request

from context_ledger.auth.authorizer import AUTH_ERROR_KEY
from context_ledger.auth.principal import Principal
from context_ledger.errors import ForbiddenError, UnauthorizedError

#: Names under which a request could claim an organisation or a user. Identity comes from the
#: token; a request naming anyone else is refused with 403 (docs/api.md: "Identity").
ORG_KEYS = frozenset({"orgId", "organisationId", "organizationId", "org_id"})
USER_KEYS = frozenset({"userId", "user_id"})


def verified_principal(scope: Mapping[str, Any]) -> Principal:
    """The caller the authorizer verified, from the ASGI scope of a Lambda event (Mangum puts the
    event there), or :class:`UnauthorizedError`: a refused credential, or no authorizer at all."""
    event = scope.get("aws.event") or {}
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    context = authorizer.get("lambda") or {}
    if AUTH_ERROR_KEY in context:
        raise UnauthorizedError(str(context[AUTH_ERROR_KEY]))
    try:
        return Principal.from_authorizer_context(context)
    except (KeyError, ValueError) as exc:
        raise UnauthorizedError("no verified credential") from exc


def _refuse_foreign_identity(principal: Principal, fields: dict[str, Any]) -> None:
    for key, value in fields.items():
        if key in ORG_KEYS and str(value) != str(principal.org_id):
            raise ForbiddenError("organisation comes from your token; this request names another")
        if key in USER_KEYS and str(value) != principal.user_id:
            raise ForbiddenError("the user comes from your token; this request names another")


async def current_principal(request: Request) -> Principal:
    """FastAPI dependency: the verified caller, or 401."""
    principal = verified_principal(request.scope)
    _refuse_foreign_identity(principal, dict(request.query_params))
    body = await request.body()
    if body and request.headers.get("content-type", "").startswith("application/json"):
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            parsed = None  # the route's body validation answers 400
        if isinstance(parsed, dict):
            _refuse_foreign_identity(principal, parsed)
            # and in the items of a batch (``{"memories": [{...}, ...]}``): each is a body
            for value in parsed.values():
                if isinstance(value, list):
                    for item in value:
                        if isinstance(item, dict):
                            _refuse_foreign_identity(principal, item)
    return principal
