"""Which spaces and sources a retrieval searches.

With a ``spaceId``: that space and its ancestors up to the organisation. Without: the organisation
chain, i.e. the organisation space and the caller's personal space. Of those, only spaces where the
caller holds ``context:space:search`` contribute, and of their sources only published ones of the
requested kinds.

The chain, its sources and the query's terms over them are sent together (one round trip): the
sources and terms statements select the chain's spaces again, whatever the caller's grants, and the
use case keeps the sources of the spaces the chain says it may search. The terms are counted per
source, so the use case sums those of the sources it searches (retrieval/service.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import psycopg

from context_ledger.auth.principal import Principal
from context_ledger.db.pending import Pending, send
from context_ledger.errors import SpaceNotFoundError
from context_ledger.search.fulltext import TermCounts, pending_terms_of, term_stats_statement
from context_ledger.sources.model import SourceKind
from context_ledger.spaces import store as spaces_store
from context_ledger.spaces.levels import Level

# The chain's spaces from ``{start}`` up to the organisation, nearest first (depth 0).
_CHAIN_SPACES = """chain AS (
    SELECT id, parent_id, level, owner_user_id, 0 AS depth
    FROM spaces WHERE org_id = %(org_id)s AND {start}
    UNION ALL
    SELECT s.id, s.parent_id, s.level, s.owner_user_id, c.depth + 1
    FROM spaces s JOIN chain c ON s.id = c.parent_id
)"""
_FROM_SPACE = "id = %(space_id)s"

# Each space of the chain with whether a grant to the caller on it or an ancestor gives search
# (every permission implies search). The chain is a path, so "an ancestor" is any chain row at
# the same or a greater depth.
_GRANTS = """
SELECT c.id, c.level, c.owner_user_id,
       EXISTS (
           SELECT 1 FROM chain a JOIN grants g ON g.space_id = a.id
           WHERE a.depth >= c.depth AND g.subject = ANY(%(subjects)s)
       ) AS granted
FROM chain c ORDER BY c.depth
"""
_CHAIN_FROM_SPACE = "WITH RECURSIVE " + _CHAIN_SPACES.format(start=_FROM_SPACE) + _GRANTS
#: The organisation space alone (it has no parent), with the caller's grants on it.
_ORGANISATION_CHAIN = (
    "WITH RECURSIVE " + _CHAIN_SPACES.format(start="level = 'organisation'") + _GRANTS
)

# The published sources of the requested kinds in the chain's spaces, whatever the caller's
# grants: the chain's sources statement returns them, and the chain's terms statement counts
# the query terms over them. One definition, so both read the same sources.
_SEARCHED = """, searched AS (
    SELECT id, space_id, kind, name, classification, index_version, updated_at FROM sources
    WHERE org_id = %(org_id)s AND space_id IN (SELECT id FROM chain)
      AND index_version > 0 AND (%(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s::text[]))
)"""


class _SourcesSql(NamedTuple):
    sources: str  # the chain's sources
    terms: str  # the query's terms over them


def _sources_sql(start: str) -> _SourcesSql:
    ctes = _CHAIN_SPACES.format(start=start) + _SEARCHED
    return _SourcesSql(f"WITH RECURSIVE {ctes} SELECT * FROM searched", term_stats_statement(ctes))


_SOURCES_FROM_SPACE = _sources_sql(_FROM_SPACE)
#: Without a ``spaceId``: the organisation space and the caller's personal space.
_SOURCES_FROM_ORGANISATION = _sources_sql(
    "(level = 'organisation' OR (level = 'personal' AND owner_user_id = %(user_id)s))"
)


@dataclass(frozen=True)
class SearchSpace:
    id: uuid.UUID
    level: Level


@dataclass(frozen=True)
class SearchSource:
    id: uuid.UUID
    space_id: uuid.UUID
    kind: SourceKind
    name: str
    classification: str
    index_version: int
    #: when the source last changed: a publish, or a memory write within its one version
    updated_at: datetime


def _may_search(principal: Principal, row: dict) -> bool:
    if row["level"] == Level.PERSONAL:
        return principal.is_person and row["owner_user_id"] == principal.user_id
    return principal.is_context_admin or row["granted"]


def _searchable(principal: Principal, rows: list[dict]) -> list[SearchSpace]:
    return [
        SearchSpace(id=r["id"], level=Level(r["level"])) for r in rows if _may_search(principal, r)
    ]


def _rows(cursor: psycopg.Cursor) -> list[dict]:
    return cursor.fetchall()


def pending_search_spaces(
    conn: psycopg.Connection, principal: Principal, space_id: uuid.UUID | None
) -> Pending[list[SearchSpace]]:
    """The spaces of the chain the caller may search, nearest first, sent now and read later
    (db/pending.py).

    A start space that does not exist, belongs to another organisation or is invisible to the
    caller is ``404 context.space.not_found``, raised when read. Every permission a grant gives
    includes search, so a space the caller can see is a space it can search. Without a
    ``spaceId`` the caller's personal space (created on first use) and the organisation space
    are sent together."""
    params = {"org_id": principal.org_id, "space_id": space_id, "subjects": principal.subjects}
    if space_id is not None:
        chain = send(conn, _CHAIN_FROM_SPACE, params, _rows)

        def read_chain() -> list[SearchSpace]:
            rows = chain.result()
            if not rows or not _may_search(principal, rows[0]):
                raise SpaceNotFoundError()
            return _searchable(principal, rows)

        return Pending(read_chain)
    personal = None
    if principal.is_person:
        personal = spaces_store.pending_personal_space(
            conn, org_id=principal.org_id, user_id=principal.user_id
        )
    organisation = send(conn, _ORGANISATION_CHAIN, params, _rows)

    def read_organisation_chain() -> list[SearchSpace]:
        rows = []
        if personal is not None and (row := personal.result()) is not None:
            rows.append({**row, "granted": False})
        rows.extend(organisation.result())
        return _searchable(principal, rows)

    return Pending(read_organisation_chain)


def _sources_of(space_id: uuid.UUID | None) -> _SourcesSql:
    return _SOURCES_FROM_SPACE if space_id is not None else _SOURCES_FROM_ORGANISATION


def _chain_params(
    principal: Principal, space_id: uuid.UUID | None, kinds: frozenset[SourceKind] | None
) -> dict[str, Any]:
    return {
        "org_id": principal.org_id,
        "space_id": space_id,
        "user_id": principal.user_id,
        "kinds": sorted(kinds) if kinds else None,
    }


def pending_chain_sources(
    conn: psycopg.Connection,
    principal: Principal,
    space_id: uuid.UUID | None,
    kinds: frozenset[SourceKind] | None,
) -> Pending[list[SearchSource]]:
    """The published sources of the requested kinds in every space of the chain, whether or not
    the caller may search that space: sent with the chain itself (:func:`pending_search_spaces`),
    and the caller keeps those of the spaces it may search (:func:`searchable_sources`)."""
    statement = _sources_of(space_id).sources
    return send(conn, statement, _chain_params(principal, space_id, kinds), _sources)


def pending_chain_terms(
    conn: psycopg.Connection,
    principal: Principal,
    space_id: uuid.UUID | None,
    kinds: frozenset[SourceKind] | None,
    text: str,
) -> Pending[TermCounts]:
    """The query terms of ``text`` counted per source over :func:`pending_chain_sources`'
    sources, read in the chain's round trip: the search sums those it searches."""
    statement = _sources_of(space_id).terms
    return pending_terms_of(conn, statement, _chain_params(principal, space_id, kinds), text)


def searchable_sources(
    sources: list[SearchSource], spaces: list[SearchSpace]
) -> list[SearchSource]:
    """The chain's sources in the spaces the caller may search."""
    searchable = {s.id for s in spaces}
    return [s for s in sources if s.space_id in searchable]


def _sources(cursor: psycopg.Cursor) -> list[SearchSource]:
    return [
        SearchSource(
            id=row["id"],
            space_id=row["space_id"],
            kind=SourceKind(row["kind"]),
            name=row["name"],
            classification=row["classification"],
            index_version=row["index_version"],
            updated_at=row["updated_at"],
        )
        for row in cursor.fetchall()
    ]
