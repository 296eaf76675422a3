"""Reading attribution records, and who may see them (spec, "Attribution").

A record is visible to

- the person who retrieved (same user, and the caller is a person, not a service);
- a caller holding ``context:space:admin`` on the record's space; a record without a space (an
  organisation-chain retrieval) to holders of the ``context:admin`` scope instead;
- for reads only, ``audit:read`` holders of the same organisation (the gateway spec's auditor).

Anything else (another user, another organisation, an unknown or malformed id) answers exactly like
a record that does not exist, ``404 context.attribution.not_found``, so ids reveal nothing.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import psycopg

from context_ledger.auth.principal import SCOPE_AUDIT_READ, Principal
from context_ledger.errors import ForbiddenError, NotFoundError, SpaceNotFoundError
from context_ledger.evidence.listing import published_record
from context_ledger.spaces.permissions import Permission
from context_ledger.spaces.service import authorize_space

REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


class AttributionNotFoundError(NotFoundError):
    """The attribution does not exist, or the caller may not see it."""

    code = "context.attribution.not_found"

    def __init__(self) -> None:
        super().__init__("attribution not found")


@dataclass(frozen=True)
class Link:
    response_id: str
    created_at: datetime


@dataclass(frozen=True)
class Attribution:
    attribution_id: uuid.UUID
    request_id: str
    org_id: uuid.UUID
    user_id: str
    space_id: uuid.UUID | None
    created_at: datetime
    chain: str
    seq: int
    record: dict[str, Any]
    links: tuple[Link, ...] = ()


def parse_attribution_id(raw: str) -> uuid.UUID:
    """An attribution id from a path; anything but a UUID is an unknown attribution."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise AttributionNotFoundError() from None


def parse_request_id(raw: str) -> str:
    """A request id from a path; one the service could not have issued is unknown."""
    if not REQUEST_ID.fullmatch(raw):
        raise AttributionNotFoundError()
    return raw


def may_act_on(conn: psycopg.Connection, principal: Principal, attribution: Attribution) -> bool:
    """The owner, or an admin of the record's space (of the organisation for a spaceless one)."""
    if principal.is_person and principal.user_id == attribution.user_id:
        return True
    if attribution.space_id is None:
        return principal.is_context_admin
    try:
        authorize_space(
            conn, principal, attribution.space_id, Permission.ADMIN, action="reading attributions"
        )
    except (SpaceNotFoundError, ForbiddenError):
        return False
    return True


def may_read(conn: psycopg.Connection, principal: Principal, attribution: Attribution) -> bool:
    """Who may act on it, and the organisation's auditors (rows are already org-scoped)."""
    return principal.has_scope(SCOPE_AUDIT_READ) or may_act_on(conn, principal, attribution)


_SELECT = """
SELECT a.attribution_id, a.request_id, a.org_id, a.user_id, a.space_id, a.created_at,
       a.chain, a.seq, e.record
FROM attributions AS a
JOIN evidence_chain AS e ON e.chain = a.chain AND e.seq = a.seq
"""
_BY_ID = _SELECT + "WHERE a.org_id = %(org_id)s AND a.attribution_id = %(attribution_id)s"
_BY_REQUEST = (
    _SELECT
    + "WHERE a.org_id = %(org_id)s AND a.request_id = %(request_id)s"
    + " ORDER BY a.created_at, a.seq"
)
_LINKS = """
SELECT attribution_id, response_id, created_at FROM attribution_links
WHERE attribution_id = ANY(%(ids)s)
ORDER BY created_at, response_id
"""


def _attribution(row: dict[str, Any], links: tuple[Link, ...] = ()) -> Attribution:
    return Attribution(
        attribution_id=row["attribution_id"],
        request_id=row["request_id"],
        org_id=row["org_id"],
        user_id=row["user_id"],
        space_id=row["space_id"],
        created_at=row["created_at"],
        chain=row["chain"],
        seq=row["seq"],
        record=published_record(bytes(row["record"])),
        links=links,
    )


def _with_links(conn: psycopg.Connection, found: list[Attribution]) -> list[Attribution]:
    rows = conn.execute(_LINKS, {"ids": [a.attribution_id for a in found]}).fetchall()
    links: dict[uuid.UUID, list[Link]] = {}
    for row in rows:
        links.setdefault(row["attribution_id"], []).append(
            Link(response_id=row["response_id"], created_at=row["created_at"])
        )
    return [replace(a, links=tuple(links.get(a.attribution_id, ()))) for a in found]


def find_attribution(
    conn: psycopg.Connection, *, org_id: uuid.UUID, attribution_id: uuid.UUID
) -> Attribution | None:
    """The organisation's record by id, without its links and without a visibility check."""
    row = conn.execute(_BY_ID, {"org_id": org_id, "attribution_id": attribution_id}).fetchone()
    return None if row is None else _attribution(row)


def get_attribution(
    conn: psycopg.Connection, principal: Principal, attribution_id: uuid.UUID
) -> Attribution:
    found = find_attribution(conn, org_id=principal.org_id, attribution_id=attribution_id)
    if found is None or not may_read(conn, principal, found):
        raise AttributionNotFoundError()
    return _with_links(conn, [found])[0]


def find_request_attributions(
    conn: psycopg.Connection, *, org_id: uuid.UUID, request_id: str
) -> list[Attribution]:
    """The organisation's records of one retrieval request, without links or visibility check."""
    rows = conn.execute(_BY_REQUEST, {"org_id": org_id, "request_id": request_id}).fetchall()
    return [_attribution(row) for row in rows]


def request_attributions(
    conn: psycopg.Connection, principal: Principal, request_id: str
) -> list[Attribution]:
    """The records of one retrieval request the caller may read; none visible is a 404."""
    found = find_request_attributions(conn, org_id=principal.org_id, request_id=request_id)
    visible = [a for a in found if may_read(conn, principal, a)]
    if not visible:
        raise AttributionNotFoundError()
    return _with_links(conn, visible)
