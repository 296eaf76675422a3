"""API keys: ``ctxl_`` + 256 random bits, stored only as their SHA-256."""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg

from context_ledger.auth.principal import AuthMethod, Principal, PrincipalKind

PREFIX = "ctxl_"
#: What create_api_key issues: the prefix and token_urlsafe(32). Anything else is unknown without
#: a lookup (and a lone surrogate, which a hash cannot encode, never reaches one).
_KEY_SHAPE = re.compile(r"ctxl_[A-Za-z0-9_-]{43}")

_INSERT = """
INSERT INTO api_keys (org_id, user_id, client_id, name, key_hash, key_prefix, scopes, groups,
                      is_service, expires_at)
VALUES (%(org_id)s, %(user_id)s, %(client_id)s, %(name)s, %(key_hash)s, %(key_prefix)s,
        %(scopes)s, %(groups)s, %(is_service)s, now() + %(ttl)s * interval '1 second')
RETURNING id, expires_at
"""

_LOOKUP = """
SELECT org_id, user_id, client_id, scopes, groups, is_service
FROM api_keys
WHERE key_hash = %(key_hash)s AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > now())
"""

_REVOKE = """
UPDATE api_keys SET revoked_at = now()
WHERE id = %(id)s AND org_id = %(org_id)s AND revoked_at IS NULL
"""


@dataclass(frozen=True)
class IssuedKey:
    id: uuid.UUID
    key: str  # shown once; only its hash is stored
    expires_at: datetime | None = None


def _hash(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def looks_like_api_key(token: str) -> bool:
    return token.startswith(PREFIX)


def is_well_formed_api_key(token: str) -> bool:
    """Whether ``token`` has the shape of a key create_api_key issues (worth a lookup)."""
    return _KEY_SHAPE.fullmatch(token) is not None


def create_api_key(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    user_id: str,
    name: str = "",
    scopes: frozenset[str] = frozenset(),
    groups: frozenset[str] = frozenset(),
    service: bool = False,
    client_id: str = "api-key",
    ttl_seconds: int | None = None,
) -> IssuedKey:
    key = PREFIX + secrets.token_urlsafe(32)
    row = conn.execute(
        _INSERT,
        {
            "org_id": org_id,
            "user_id": user_id,
            "client_id": client_id,
            "name": name,
            "key_hash": _hash(key),
            "key_prefix": key[:12],
            "scopes": sorted(scopes),
            "groups": sorted(groups),
            "is_service": service,
            "ttl": ttl_seconds,
        },
    ).fetchone()
    assert row is not None
    return IssuedKey(id=row["id"], key=key, expires_at=row["expires_at"])


def principal_for_api_key(conn: psycopg.Connection, key: str) -> Principal | None:
    """The key's principal, or None for an unknown, revoked or expired key."""
    if not is_well_formed_api_key(key):
        return None
    row = conn.execute(_LOOKUP, {"key_hash": _hash(key)}).fetchone()
    if row is None:
        return None
    return Principal(
        org_id=row["org_id"],
        user_id=row["user_id"],
        client_id=row["client_id"],
        scopes=frozenset(row["scopes"]),
        groups=frozenset(row["groups"]),
        kind=PrincipalKind.SERVICE if row["is_service"] else PrincipalKind.PERSON,
        auth_method=AuthMethod.API_KEY,
    )


def revoke_api_key(conn: psycopg.Connection, *, org_id: uuid.UUID, key_id: uuid.UUID) -> bool:
    return conn.execute(_REVOKE, {"id": key_id, "org_id": org_id}).rowcount == 1
