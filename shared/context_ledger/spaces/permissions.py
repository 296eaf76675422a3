"""Space permissions: grants inherited down the tree, org administrators, personal spaces.

Rules (docs/api.md, "Identity and permissions"):
- a grant to ``user:<id>`` or ``group:<name>`` on a space applies to it and its descendants;
- ``context:space:admin`` implies ``context:space:search`` on the same spaces;
- the ``context:admin`` scope is both permissions on every space of the organisation except
  personal ones;
- a personal space belongs to its owner alone: no grant, inherited or direct, reaches it.
"""

from __future__ import annotations

import uuid
from enum import StrEnum

import psycopg

from context_ledger.auth.principal import Principal
from context_ledger.spaces.levels import Level


class Permission(StrEnum):
    SEARCH = "context:space:search"
    ADMIN = "context:space:admin"


ALL_PERMISSIONS = frozenset(Permission)

_GRANTED_ON_CHAIN = """
WITH RECURSIVE chain AS (
    SELECT id, parent_id FROM spaces WHERE org_id = %(org_id)s AND id = %(space_id)s
    UNION ALL
    SELECT s.id, s.parent_id FROM spaces s JOIN chain c ON s.id = c.parent_id
)
SELECT DISTINCT g.permission
FROM chain c JOIN grants g ON g.space_id = c.id
WHERE g.subject = ANY(%(subjects)s)
"""

_GRANTED_EVERYWHERE = """
WITH RECURSIVE granted AS (
    SELECT g.space_id AS id, g.permission
    FROM grants g WHERE g.org_id = %(org_id)s AND g.subject = ANY(%(subjects)s)
    UNION
    SELECT s.id, p.permission
    FROM spaces s JOIN granted p ON s.parent_id = p.id
    WHERE s.level <> 'personal'
)
SELECT id, array_agg(DISTINCT permission) AS permissions FROM granted GROUP BY id
"""


def _normalise(permissions: set[str]) -> frozenset[Permission]:
    found = {Permission(p) for p in permissions}
    if Permission.ADMIN in found:
        found.add(Permission.SEARCH)
    return frozenset(found)


def permissions_on(
    conn: psycopg.Connection,
    principal: Principal,
    *,
    space_id: uuid.UUID,
    level: Level,
    owner_user_id: str | None,
) -> frozenset[Permission]:
    """The caller's permissions on one space (already known to be in the caller's org)."""
    if level is Level.PERSONAL:
        is_owner = principal.is_person and owner_user_id == principal.user_id
        return ALL_PERMISSIONS if is_owner else frozenset()
    if principal.is_context_admin:
        return ALL_PERMISSIONS
    rows = conn.execute(
        _GRANTED_ON_CHAIN,
        {"org_id": principal.org_id, "space_id": space_id, "subjects": principal.subjects},
    ).fetchall()
    return _normalise({row["permission"] for row in rows})


def granted_spaces(
    conn: psycopg.Connection, principal: Principal
) -> dict[uuid.UUID, frozenset[Permission]]:
    """Every non-personal space the caller holds a permission on through grants."""
    rows = conn.execute(
        _GRANTED_EVERYWHERE, {"org_id": principal.org_id, "subjects": principal.subjects}
    ).fetchall()
    return {row["id"]: _normalise(set(row["permissions"])) for row in rows}
