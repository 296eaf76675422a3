"""SQL for organisations, spaces and grants. Every query is scoped by organisation but one, the
bootstrap's question whether the database holds any organisation yet."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from context_ledger.db.pending import Pending, send
from context_ledger.spaces.levels import Level

Row = dict[str, Any]

_SPACE_COLUMNS = "id, org_id, parent_id, level, name, key, owner_user_id, created_at"

_INSERT_ORG = "INSERT INTO organisations (name) VALUES (%(name)s) RETURNING id, name, created_at"

_FIRST_ORG = "SELECT id, name, created_at FROM organisations ORDER BY created_at, id LIMIT 1"

_INSERT_SPACE = f"""
INSERT INTO spaces (org_id, parent_id, level, name, key, owner_user_id)
VALUES (%(org_id)s, %(parent_id)s, %(level)s, %(name)s, %(key)s, %(owner_user_id)s)
RETURNING {_SPACE_COLUMNS}
"""

_GET_SPACE = f"SELECT {_SPACE_COLUMNS} FROM spaces WHERE org_id = %(org_id)s AND id = %(id)s"

_ORG_SPACE = f"""
SELECT {_SPACE_COLUMNS} FROM spaces WHERE org_id = %(org_id)s AND level = 'organisation'
"""

_ENSURE_PERSONAL = f"""
WITH root AS (SELECT id FROM spaces WHERE org_id = %(org_id)s AND level = 'organisation'),
inserted AS (
    INSERT INTO spaces (org_id, parent_id, level, name, owner_user_id)
    SELECT %(org_id)s, root.id, 'personal', %(name)s, %(user_id)s FROM root
    ON CONFLICT (org_id, owner_user_id) WHERE level = 'personal' DO NOTHING
    RETURNING {_SPACE_COLUMNS}
)
SELECT {_SPACE_COLUMNS} FROM inserted
UNION ALL
SELECT {_SPACE_COLUMNS} FROM spaces
WHERE org_id = %(org_id)s AND level = 'personal' AND owner_user_id = %(user_id)s
"""

_SPACES_BY_IDS = f"""
SELECT {_SPACE_COLUMNS} FROM spaces WHERE org_id = %(org_id)s AND id = ANY(%(ids)s)
"""

_ALL_SHARED_SPACES = f"""
SELECT {_SPACE_COLUMNS} FROM spaces WHERE org_id = %(org_id)s AND level <> 'personal'
"""

_DELETE_SUBJECT_GRANTS = """
DELETE FROM grants WHERE org_id = %(org_id)s AND space_id = %(space_id)s AND subject = %(subject)s
"""

_INSERT_GRANT = """
INSERT INTO grants (org_id, space_id, subject, permission, granted_by)
VALUES (%(org_id)s, %(space_id)s, %(subject)s, %(permission)s, %(granted_by)s)
"""


def insert_organisation(conn: psycopg.Connection, *, name: str) -> tuple[Row, Row]:
    """Create an organisation and its organisation-level space; return both rows."""
    org = conn.execute(_INSERT_ORG, {"name": name}).fetchone()
    assert org is not None
    space = insert_space(
        conn, org_id=org["id"], parent_id=None, level=Level.ORGANISATION, name=name
    )
    return org, space


def first_organisation(conn: psycopg.Connection) -> Row | None:
    """The oldest organisation of the database, or None while it holds none."""
    return conn.execute(_FIRST_ORG).fetchone()


def insert_space(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    parent_id: uuid.UUID | None,
    level: Level,
    name: str,
    key: str | None = None,
    owner_user_id: str | None = None,
) -> Row:
    row = conn.execute(
        _INSERT_SPACE,
        {
            "org_id": org_id,
            "parent_id": parent_id,
            "level": level.value,
            "name": name,
            "key": key,
            "owner_user_id": owner_user_id,
        },
    ).fetchone()
    assert row is not None
    return row


def get_space(conn: psycopg.Connection, *, org_id: uuid.UUID, space_id: uuid.UUID) -> Row | None:
    return conn.execute(_GET_SPACE, {"org_id": org_id, "id": space_id}).fetchone()


def organisation_space(conn: psycopg.Connection, *, org_id: uuid.UUID) -> Row | None:
    return conn.execute(_ORG_SPACE, {"org_id": org_id}).fetchone()


def ensure_personal_space(
    conn: psycopg.Connection, *, org_id: uuid.UUID, user_id: str
) -> Row | None:
    """The user's personal space, created on first use (safe under concurrent first uses).

    None when the organisation does not exist (a token of an organisation not registered here).
    """
    return pending_personal_space(conn, org_id=org_id, user_id=user_id).result()


def pending_personal_space(
    conn: psycopg.Connection, *, org_id: uuid.UUID, user_id: str
) -> Pending[Row | None]:
    """:func:`ensure_personal_space`, sent now and read later (db/pending.py)."""
    params = {"org_id": org_id, "user_id": user_id, "name": f"Personal space of {user_id}"[:200]}
    first = send(conn, _ENSURE_PERSONAL, params, lambda cursor: cursor.fetchone())

    def read() -> Row | None:
        row = first.result()
        if row is None:  # a concurrent transaction inserted it after our snapshot, or no such org
            row = conn.execute(_ENSURE_PERSONAL, params).fetchone()
        return row

    return Pending(read)


def spaces_by_ids(
    conn: psycopg.Connection, *, org_id: uuid.UUID, ids: list[uuid.UUID]
) -> list[Row]:
    return conn.execute(_SPACES_BY_IDS, {"org_id": org_id, "ids": ids}).fetchall()


def shared_spaces(conn: psycopg.Connection, *, org_id: uuid.UUID) -> list[Row]:
    """Every space of the organisation except personal ones."""
    return conn.execute(_ALL_SHARED_SPACES, {"org_id": org_id}).fetchall()


def replace_grants(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    space_id: uuid.UUID,
    subject: str,
    permissions: frozenset[str],
    granted_by: str,
) -> None:
    """Set exactly ``permissions`` for ``subject`` on the space (empty revokes all)."""
    conn.execute(
        _DELETE_SUBJECT_GRANTS, {"org_id": org_id, "space_id": space_id, "subject": subject}
    )
    for permission in sorted(permissions):
        conn.execute(
            _INSERT_GRANT,
            {
                "org_id": org_id,
                "space_id": space_id,
                "subject": subject,
                "permission": permission,
                "granted_by": granted_by,
            },
        )
