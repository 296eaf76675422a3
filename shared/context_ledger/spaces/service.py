"""Use cases on spaces: create organisations and spaces, list, read, grant.

Visibility rule: a caller sees a space when it holds any permission on it. A space the caller
cannot see answers exactly like one that does not exist (``404 context.space.not_found``), so ids
of other organisations (or of spaces hidden from the caller) reveal nothing.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg

from context_ledger.auth.principal import Principal
from context_ledger.errors import ForbiddenError, SpaceNotFoundError, ValidationFailedError
from context_ledger.spaces import store
from context_ledger.spaces.levels import Level, may_nest
from context_ledger.spaces.permissions import (
    ALL_PERMISSIONS,
    Permission,
    granted_spaces,
    permissions_on,
)

SUBJECT_PATTERN = re.compile(r"^(user|group):[A-Za-z0-9._@+:|-]{1,200}$")


@dataclass(frozen=True)
class Space:
    id: uuid.UUID
    org_id: uuid.UUID
    parent_id: uuid.UUID | None
    level: Level
    name: str
    key: str | None
    created_at: datetime
    permissions: frozenset[Permission]

    @classmethod
    def from_row(cls, row: store.Row, permissions: frozenset[Permission]) -> Space:
        return cls(
            id=row["id"],
            org_id=row["org_id"],
            parent_id=row["parent_id"],
            level=Level(row["level"]),
            name=row["name"],
            key=row["key"],
            created_at=row["created_at"],
            permissions=permissions,
        )


@dataclass(frozen=True)
class Organisation:
    id: uuid.UUID
    name: str
    space_id: uuid.UUID


def parse_space_id(raw: object) -> uuid.UUID:
    """A space id from a path or body; anything but a UUID (of any length or JSON type) is an
    unknown space (spec)."""
    if isinstance(raw, uuid.UUID):
        return raw
    if not isinstance(raw, str):
        raise SpaceNotFoundError()
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise SpaceNotFoundError() from None


def create_organisation(conn: psycopg.Connection, *, name: str) -> Organisation:
    name = name.strip()
    if not 1 <= len(name) <= 200:
        raise ValidationFailedError("organisation name must be 1 to 200 characters")
    org, space = store.insert_organisation(conn, name=name)
    return Organisation(id=org["id"], name=org["name"], space_id=space["id"])


def _visible_space(
    conn: psycopg.Connection, principal: Principal, space_id: uuid.UUID
) -> tuple[store.Row, frozenset[Permission]]:
    row = store.get_space(conn, org_id=principal.org_id, space_id=space_id)
    if row is None:
        raise SpaceNotFoundError()
    permissions = permissions_on(
        conn,
        principal,
        space_id=row["id"],
        level=Level(row["level"]),
        owner_user_id=row["owner_user_id"],
    )
    if not permissions:
        raise SpaceNotFoundError()
    return row, permissions


def organisation_space_id(conn: psycopg.Connection, principal: Principal) -> uuid.UUID:
    """The caller's organisation space (every organisation has one; 404 if not registered)."""
    root = store.organisation_space(conn, org_id=principal.org_id)
    if root is None:
        raise SpaceNotFoundError("organisation has no organisation space")
    return root["id"]


def _require_admin(permissions: frozenset[Permission], what: str) -> None:
    if Permission.ADMIN not in permissions:
        raise ForbiddenError(f"{what} needs context:space:admin on the space")


def authorize_space(
    conn: psycopg.Connection,
    principal: Principal,
    space_id: uuid.UUID,
    permission: Permission,
    *,
    action: str,
) -> Space:
    """The space if the caller holds ``permission`` on it: 404 when the caller cannot see it at
    all (or it is another organisation's), 403 when it can see it but lacks the permission."""
    row, permissions = _visible_space(conn, principal, space_id)
    if permission not in permissions:
        raise ForbiddenError(f"{action} needs {permission.value} on the space")
    return Space.from_row(row, permissions)


def get_space(conn: psycopg.Connection, principal: Principal, space_id: uuid.UUID) -> Space:
    row, permissions = _visible_space(conn, principal, space_id)
    return Space.from_row(row, permissions)


def list_spaces(conn: psycopg.Connection, principal: Principal) -> list[Space]:
    """Spaces the caller can see, the personal space included (created on first use)."""
    if principal.is_context_admin:
        rows = store.shared_spaces(conn, org_id=principal.org_id)
        found = [Space.from_row(row, ALL_PERMISSIONS) for row in rows]
    else:
        granted = granted_spaces(conn, principal)
        rows = store.spaces_by_ids(conn, org_id=principal.org_id, ids=list(granted))
        found = [Space.from_row(row, granted[row["id"]]) for row in rows]
    if principal.is_person:
        personal = store.ensure_personal_space(
            conn, org_id=principal.org_id, user_id=principal.user_id
        )
        if personal is not None:
            found.append(Space.from_row(personal, ALL_PERMISSIONS))
    return sorted(found, key=lambda s: (s.created_at, str(s.id)))


def create_space(
    conn: psycopg.Connection,
    principal: Principal,
    *,
    name: str,
    level: Level,
    parent_id: uuid.UUID | None,
) -> Space:
    """Create a space under ``parent_id`` (default: the organisation space).

    Needs ``context:space:admin`` on the parent; for a space directly under the organisation
    that means the ``context:admin`` scope or an admin grant on the organisation space.
    """
    parent, permissions = _visible_space(
        conn, principal, parent_id or organisation_space_id(conn, principal)
    )
    _require_admin(permissions, "creating a space")
    parent_level = Level(parent["level"])
    if not may_nest(level, parent_level):
        raise ValidationFailedError(
            f"a {level.value} space cannot be created under a {parent_level.value} space"
        )
    row = store.insert_space(
        conn, org_id=principal.org_id, parent_id=parent["id"], level=level, name=name.strip()
    )
    return Space.from_row(row, permissions)


def set_grants(
    conn: psycopg.Connection,
    principal: Principal,
    *,
    space_id: uuid.UUID,
    subject: str,
    permissions: list[Permission],
) -> None:
    """Give ``subject`` exactly ``permissions`` on the space and its descendants."""
    row, caller_permissions = _visible_space(conn, principal, space_id)
    _require_admin(caller_permissions, "changing grants")
    if Level(row["level"]) is Level.PERSONAL:
        raise ValidationFailedError("personal spaces cannot be shared")
    if not SUBJECT_PATTERN.fullmatch(subject):
        raise ValidationFailedError("subject must be 'user:<id>' or 'group:<name>'")
    store.replace_grants(
        conn,
        org_id=principal.org_id,
        space_id=row["id"],
        subject=subject,
        permissions=frozenset(p.value for p in permissions),
        granted_by=f"user:{principal.user_id}",
    )
