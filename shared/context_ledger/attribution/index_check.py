"""The lookup tables against the chain: every ``attributions`` and ``attribution_links`` row of a
chain must agree with the entry it points at (attribution.lookup serves nothing else).

Verification (CLI, API, the daily job) runs this beside the chain walk and reports the rows that
disagree: a row pointing at another organisation's entry, one with another owner, request or
space than its entry, a link row whose response id or attribution is not its entry's. The same
rules decide what a lookup may serve (``attribution_disagreement``, ``link_disagreement``), so the
two cannot drift.

PostgreSQL extracts the few record fields compared, so the records themselves never travel; the
MACs are the chain walk's to check. Rows are read through one server-side cursor, ``batch`` at a
time, in no particular order (the problems are sorted at the end). Rows pointing at entries before
``from_seq`` are left out: a verification that trusts those entries (from a checkpoint) trusts
their rows too, and the daily job verifies in full.

Two details of the statements decide their cost at scale (``bench/chain_scale.py``, see
docs/decisions.md "A cut tail is caught"): ``OFFSET 0`` keeps the planner from pulling the
``LATERAL`` subquery up into the select list, where each record would be parsed into ``jsonb``
once per field read (seven times) instead of once; and there is no ``ORDER BY``, which sorted all
of a chain's rows (spilling to disk) for an order nothing relies on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.rows import dict_row

from context_ledger.attribution.lookup import attribution_disagreement, link_disagreement
from context_ledger.evidence.chain import org_id_of_chain
from context_ledger.evidence.verify_job import IndexProblem

NO_ENTRY = "the row points at no entry"

_FIELDS = """
e.seq IS NOT NULL AS has_entry, e.category,
r->>'chain' AS chain, r->>'orgId' AS org_id, r->>'attributionId' AS attribution_id,
r->>'requestId' AS request_id, r->>'userId' AS user_id, r->>'spaceId' AS space_id,
r->>'responseId' AS response_id
"""
_ATTRIBUTION_ROWS = (
    """
SELECT a.attribution_id AS row_attribution_id, a.request_id AS row_request_id,
       a.user_id AS row_user_id, a.space_id AS row_space_id, a.org_id AS row_org_id,
       a.seq AS row_seq,"""
    + _FIELDS
    + """
FROM attributions AS a
LEFT JOIN evidence_chain AS e ON e.chain = a.chain AND e.seq = a.seq
LEFT JOIN LATERAL (SELECT convert_from(e.record, 'UTF8')::jsonb AS r OFFSET 0) AS parsed ON true
WHERE a.chain = %(chain)s AND a.seq >= %(from_seq)s
"""
)
_LINK_ROWS = (
    """
SELECT l.attribution_id AS row_attribution_id, l.response_id AS row_response_id,
       l.seq AS row_seq, a.chain AS attribution_chain,"""
    + _FIELDS
    + """
FROM attribution_links AS l
JOIN attributions AS a ON a.attribution_id = l.attribution_id
LEFT JOIN evidence_chain AS e ON e.chain = l.chain AND e.seq = l.seq
LEFT JOIN LATERAL (SELECT convert_from(e.record, 'UTF8')::jsonb AS r OFFSET 0) AS parsed ON true
WHERE l.chain = %(chain)s AND l.seq >= %(from_seq)s
"""
)
_RECORD_FIELDS = (
    "category",
    "chain",
    "org_id",
    "attribution_id",
    "request_id",
    "user_id",
    "space_id",
    "response_id",
)
_WIRE_NAMES = {
    "org_id": "orgId",
    "attribution_id": "attributionId",
    "request_id": "requestId",
    "user_id": "userId",
    "space_id": "spaceId",
    "response_id": "responseId",
}


def check_lookup_rows(
    conn: psycopg.Connection, *, chain: str, from_seq: int = 1, batch: int = 5000
) -> list[IndexProblem]:
    """Every lookup row of ``chain`` (pointing at seq ``from_seq`` or later) that its entry
    does not back, in seq order."""
    problems = [
        IndexProblem("attributions", str(row["row_attribution_id"]), row["row_seq"], problem)
        for row in _rows(conn, _ATTRIBUTION_ROWS, chain=chain, from_seq=from_seq, batch=batch)
        if (problem := _attribution_problem(row, chain=chain)) is not None
    ]
    problems += [
        IndexProblem(
            "attribution_links",
            f"{row['row_attribution_id']}/{row['row_response_id']}",
            row["row_seq"],
            problem,
        )
        for row in _rows(conn, _LINK_ROWS, chain=chain, from_seq=from_seq, batch=batch)
        if (problem := _link_problem(row)) is not None
    ]
    return sorted(problems, key=lambda p: (p.seq, p.table, p.key))


def _rows(
    conn: psycopg.Connection, statement: str, *, chain: str, from_seq: int, batch: int
) -> Iterator[dict[str, Any]]:
    with conn.cursor(name="lookup_rows", row_factory=dict_row, withhold=conn.autocommit) as cur:
        cur.itersize = batch
        cur.execute(statement, {"chain": chain, "from_seq": from_seq})
        yield from cur


def _record(row: dict[str, Any]) -> dict[str, Any]:
    """The entry's compared fields, under the record's own names."""
    return {_WIRE_NAMES.get(name, name): row[name] for name in _RECORD_FIELDS}


def _attribution_problem(row: dict[str, Any], *, chain: str) -> str | None:
    if not row["has_entry"]:
        return NO_ENTRY
    # The row's organisation must own the chain it points into: a row moved to another
    # organisation's chain (or given another org_id) fails here even if the ids match.
    org_id = org_id_of_chain(chain)
    if org_id is None or org_id != row["row_org_id"]:
        return "the row's organisation does not own the chain"
    return attribution_disagreement(row, _record(row), org_id=org_id)


def _link_problem(row: dict[str, Any]) -> str | None:
    if not row["has_entry"]:
        return NO_ENTRY
    return link_disagreement(
        row,
        _record(row),
        attribution_id=row["row_attribution_id"],
        chain=row["attribution_chain"],
    )
