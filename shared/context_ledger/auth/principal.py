"""The verified caller, as the authorizer hands it to every function.

The authorizer puts the principal into the API Gateway authorizer context (HTTP API, simple
responses): ``event.requestContext.authorizer.lambda``. Handlers read it from there only; the body,
query string and headers never name the organisation or user.

Context values are strings or booleans, because API Gateway passes only flat scalars through.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: Scope that makes the caller an administrator of its organisation's context API.
SCOPE_CONTEXT_ADMIN = "context:admin"
#: Scope that lets the caller read every attribution record of its organisation.
SCOPE_AUDIT_READ = "audit:read"


class PrincipalKind(StrEnum):
    PERSON = "person"
    SERVICE = "service"


class AuthMethod(StrEnum):
    JWT = "jwt"
    API_KEY = "api_key"


@dataclass(frozen=True)
class Principal:
    """A verified caller: organisation, user, OAuth client, scopes, groups and kind."""

    org_id: uuid.UUID
    user_id: str
    client_id: str | None
    scopes: frozenset[str] = field(default_factory=frozenset)
    groups: frozenset[str] = field(default_factory=frozenset)
    kind: PrincipalKind = PrincipalKind.PERSON
    auth_method: AuthMethod = AuthMethod.JWT

    @property
    def is_person(self) -> bool:
        return self.kind is PrincipalKind.PERSON

    @property
    def is_context_admin(self) -> bool:
        return SCOPE_CONTEXT_ADMIN in self.scopes

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def subjects(self) -> list[str]:
        """Grant subjects that match this caller: ``user:<id>`` and ``group:<name>`` each."""
        return [f"user:{self.user_id}", *(f"group:{g}" for g in sorted(self.groups))]

    def to_authorizer_context(self) -> dict[str, str | bool]:
        return {
            "orgId": str(self.org_id),
            "userId": self.user_id,
            "clientId": self.client_id or "",
            "scopes": " ".join(sorted(self.scopes)),
            "groups": "\n".join(sorted(self.groups)),
            "principalKind": self.kind.value,
            "authMethod": self.auth_method.value,
        }

    @classmethod
    def from_authorizer_context(cls, context: dict[str, Any]) -> Principal:
        """Rebuild the principal; raises ValueError when the context is incomplete."""
        return cls(
            org_id=uuid.UUID(str(context["orgId"])),
            user_id=_required(context, "userId"),
            client_id=str(context.get("clientId") or "") or None,
            scopes=frozenset(str(context.get("scopes") or "").split()),
            groups=frozenset(g for g in str(context.get("groups") or "").split("\n") if g),
            kind=PrincipalKind(str(context.get("principalKind") or PrincipalKind.PERSON)),
            auth_method=AuthMethod(str(context.get("authMethod") or AuthMethod.JWT)),
        )


def _required(context: dict[str, Any], key: str) -> str:
    value = str(context.get(key) or "")
    if not value:
        raise ValueError(f"authorizer context has no {key}")
    return value
