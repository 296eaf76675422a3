"""Reading attribution records, and who may see them (spec, "Attribution").

A record is visible to

- the person who retrieved (same user, and the caller is a person, not a service);
- a caller holding ``context:space:admin`` on the record's space; for a record without a space
  (an organisation-chain retrieval), on the organisation space (the ``context:admin`` scope or an
  admin grant there);
- for reads only, ``audit:read`` holders of the same organisation (the gateway spec's auditor).

except a record that delivered chunks of a personal space, which only its owner sees: the space is
its owner's alone, and so are its source and chunk ids and its content's SHA-256 (which would
confirm a guess of the content).

Anything else (another user, another organisation, an unknown or malformed id) answers exactly like
a record that does not exist, ``404 context.attribution.not_found``, so ids reveal nothing.

The ``attributions`` and ``attribution_links`` rows are indexes over the evidence chain, and a
database writer can edit them: point a row at another organisation's entry, give it another
owner, swap a link's response id. So a lookup serves only what the chain entry says, once its MAC
verifies, the entry is the caller's organisation's record, and its ids and owner equal the row's;
a row that disagrees is served as not found, logged, and reported by every verification
(attribution.index_check).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import psycopg
from aws_lambda_powertools import Logger

from context_ledger.attribution.events import CATEGORY
from context_ledger.auth.principal import SCOPE_AUDIT_READ, Principal
from context_ledger.db.pending import send
from context_ledger.errors import ForbiddenError, NotFoundError, SpaceNotFoundError
from context_ledger.evidence.chain import authentic_record, org_chain
from context_ledger.evidence.keys import KeyRing, refresh_key_ring
from context_ledger.evidence.listing import published_record
from context_ledger.spaces.permissions import Permission
from context_ledger.spaces.service import authorize_space, organisation_space_id

logger = Logger(child=True)

#: The category of a link entry (attribution.links appends them).
LINK_CATEGORY = "context_attribution_link"

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


# Whether a record delivered chunks of a personal space: its provenance (source and chunk ids,
# the content's SHA-256) is the owner's alone, as the space is.
_OF_PERSONAL_SPACE = """
SELECT EXISTS (
    SELECT 1 FROM sources s JOIN spaces sp ON sp.id = s.space_id
    WHERE s.org_id = %(org_id)s AND s.id = ANY(%(source_ids)s::uuid[]) AND sp.level = 'personal'
) AS personal
"""


def _is_owner(principal: Principal, attribution: Attribution) -> bool:
    return principal.is_person and principal.user_id == attribution.user_id


def _of_personal_space(conn: psycopg.Connection, attribution: Attribution) -> bool:
    source_ids = attribution.record.get("sourceIds") or []
    if not source_ids:
        return False
    params = {"org_id": attribution.org_id, "source_ids": list(source_ids)}
    return bool(send(conn, _OF_PERSONAL_SPACE, params, _personal).result())


def _personal(cursor: psycopg.Cursor[dict[str, Any]]) -> bool:
    row = cursor.fetchone()
    return bool(row and row["personal"])


def may_act_on(conn: psycopg.Connection, principal: Principal, attribution: Attribution) -> bool:
    """The owner, or an admin of the record's space. A spaceless record is an organisation-chain
    retrieval, so its space is the organisation space: the ``context:admin`` scope or an admin
    grant on that space (the same rule as creating a space under it); but one that delivered
    chunks of the owner's personal space is the owner's alone, as that space is."""
    if _is_owner(principal, attribution):
        return True
    if _of_personal_space(conn, attribution):
        return False
    try:
        space_id = attribution.space_id or organisation_space_id(conn, principal)
        authorize_space(conn, principal, space_id, Permission.ADMIN, action="reading attributions")
    except (SpaceNotFoundError, ForbiddenError):
        return False
    return True


def may_read(conn: psycopg.Connection, principal: Principal, attribution: Attribution) -> bool:
    """Who may act on it, and the organisation's auditors (rows are already org-scoped), except
    for a record of a personal space's chunks, which only its owner reads."""
    if principal.has_scope(SCOPE_AUDIT_READ) and not _is_owner(principal, attribution):
        return not _of_personal_space(conn, attribution)
    return may_act_on(conn, principal, attribution)


# The lookup row says where its entry is; everything served comes from the entry, once its MAC
# holds and it agrees with the row (see _from_entry). The entry's columns keep their names, the
# row's are prefixed, for evidence.chain.authentic_record.
_ENTRY_COLUMNS = """
e.chain, e.seq, e.record_id, e.category, e.org_id, e.record, e.key_id, e.prev_mac, e.mac,
e.created_at
"""
_SELECT = (
    "SELECT a.attribution_id AS row_attribution_id, a.request_id AS row_request_id,"
    " a.user_id AS row_user_id, a.space_id AS row_space_id,"
    + _ENTRY_COLUMNS
    + " FROM attributions AS a JOIN evidence_chain AS e ON e.chain = a.chain AND e.seq = a.seq "
)
_BY_ID = _SELECT + "WHERE a.org_id = %(org_id)s AND a.attribution_id = %(attribution_id)s"
_BY_REQUEST = (
    _SELECT
    + "WHERE a.org_id = %(org_id)s AND a.request_id = %(request_id)s"
    + " ORDER BY e.created_at, e.seq"
)
_LINKS = (
    "SELECT l.attribution_id AS row_attribution_id, l.response_id AS row_response_id,"
    + _ENTRY_COLUMNS
    + """ FROM attribution_links AS l
JOIN evidence_chain AS e ON e.chain = l.chain AND e.seq = l.seq
WHERE l.attribution_id = ANY(%(ids)s)
ORDER BY e.created_at, l.response_id
"""
)


def attribution_disagreement(
    row: dict[str, Any], record: dict[str, Any] | None, *, org_id: uuid.UUID
) -> str | None:
    """Why a lookup row may not be served from its entry (``record``, None when the entry is not
    authentic), or None when the entry is the organisation's record of exactly that row."""
    if record is None:
        return "the entry's MAC does not verify"
    if record.get("category") != CATEGORY:
        return "the entry is not an attribution record"
    if record.get("orgId") != str(org_id) or record.get("chain") != org_chain(org_id):
        return "the entry belongs to another organisation"
    stated = {
        "attributionId": str(row["row_attribution_id"]),
        "requestId": row["row_request_id"],
        "userId": row["row_user_id"],
        "spaceId": None if row["row_space_id"] is None else str(row["row_space_id"]),
    }
    differing = sorted(name for name, value in stated.items() if record.get(name) != value)
    if differing:
        verb = "differs" if len(differing) == 1 else "differ"
        return f"the row's {', '.join(differing)} {verb} from the entry's"
    return None


def link_disagreement(
    row: dict[str, Any], record: dict[str, Any] | None, *, attribution_id: uuid.UUID, chain: str
) -> str | None:
    """Why a link row of attribution ``attribution_id`` (whose entry is in ``chain``) may not be
    served from its entry, or None when it is that link's entry."""
    if record is None:
        return "the entry's MAC does not verify"
    if record.get("category") != LINK_CATEGORY or record.get("chain") != chain:
        return "the entry is not a link of this attribution's chain"
    if record.get("attributionId") != str(attribution_id):
        return "the entry links another attribution"
    if record.get("responseId") != row["row_response_id"]:
        return "the row's responseId differs from the entry's"
    return None


def _from_entry(row: dict[str, Any], *, org_id: uuid.UUID, keys: KeyRing) -> Attribution | None:
    """The attribution as its entry states it; None (logged) when row and entry disagree."""
    record = authentic_record(row, keys=keys, reload_keys=refresh_key_ring)
    problem = attribution_disagreement(row, record, org_id=org_id)
    if problem is not None:
        _log_disagreement("attributions", row, problem)
        return None
    space_id = record.get("spaceId")
    return Attribution(
        attribution_id=uuid.UUID(record["attributionId"]),
        request_id=record["requestId"],
        org_id=org_id,
        user_id=record["userId"],
        space_id=None if space_id is None else uuid.UUID(space_id),
        created_at=row["created_at"],
        chain=row["chain"],
        seq=row["seq"],
        record=published_record(bytes(row["record"])),
    )


def _log_disagreement(table: str, row: dict[str, Any], problem: str) -> None:
    """A lookup row that its entry does not back is tampering or a bug: never served, always
    told (and reported by every verification, see attribution.index_check)."""
    logger.error(
        "lookup row disagrees with its evidence entry",
        table=table,
        attributionId=str(row["row_attribution_id"]),
        chain=row["chain"],
        seq=row["seq"],
        problem=problem,
    )


def _with_links(
    conn: psycopg.Connection, found: list[Attribution], *, keys: KeyRing
) -> list[Attribution]:
    by_id = {a.attribution_id: a for a in found}
    rows = conn.execute(_LINKS, {"ids": list(by_id)}).fetchall()
    links: dict[uuid.UUID, list[Link]] = {}
    for row in rows:
        attribution = by_id[row["row_attribution_id"]]
        record = authentic_record(row, keys=keys, reload_keys=refresh_key_ring)
        problem = link_disagreement(
            row, record, attribution_id=attribution.attribution_id, chain=attribution.chain
        )
        if problem is not None:
            _log_disagreement("attribution_links", row, problem)
            continue
        links.setdefault(attribution.attribution_id, []).append(
            Link(response_id=record["responseId"], created_at=row["created_at"])
        )
    return [replace(a, links=tuple(links.get(a.attribution_id, ()))) for a in found]


def find_attribution(
    conn: psycopg.Connection, *, org_id: uuid.UUID, attribution_id: uuid.UUID, keys: KeyRing
) -> Attribution | None:
    """The organisation's record by id, without its links and without a visibility check."""
    row = conn.execute(_BY_ID, {"org_id": org_id, "attribution_id": attribution_id}).fetchone()
    return None if row is None else _from_entry(row, org_id=org_id, keys=keys)


def get_attribution(
    conn: psycopg.Connection, principal: Principal, attribution_id: uuid.UUID, *, keys: KeyRing
) -> Attribution:
    found = find_attribution(
        conn, org_id=principal.org_id, attribution_id=attribution_id, keys=keys
    )
    if found is None or not may_read(conn, principal, found):
        raise AttributionNotFoundError()
    return _with_links(conn, [found], keys=keys)[0]


def find_request_attributions(
    conn: psycopg.Connection, *, org_id: uuid.UUID, request_id: str, keys: KeyRing
) -> list[Attribution]:
    """The organisation's records of one retrieval request, without links or visibility check."""
    rows = conn.execute(_BY_REQUEST, {"org_id": org_id, "request_id": request_id}).fetchall()
    found = [_from_entry(row, org_id=org_id, keys=keys) for row in rows]
    return [a for a in found if a is not None]


def request_attributions(
    conn: psycopg.Connection, principal: Principal, request_id: str, *, keys: KeyRing
) -> list[Attribution]:
    """The records of one retrieval request the caller may read; none visible is a 404."""
    found = find_request_attributions(
        conn, org_id=principal.org_id, request_id=request_id, keys=keys
    )
    visible = [a for a in found if may_read(conn, principal, a)]
    if not visible:
        raise AttributionNotFoundError()
    return _with_links(conn, visible, keys=keys)
