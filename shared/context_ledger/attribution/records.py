"""The ``attributions`` lookup rows: an index over the chain's context_attribution entries."""

from __future__ import annotations

import uuid

import psycopg

_INSERT_ATTRIBUTION = """
INSERT INTO attributions (attribution_id, request_id, org_id, user_id, space_id, chain, seq)
VALUES (%(attribution_id)s, %(request_id)s, %(org_id)s, %(user_id)s, %(space_id)s, %(chain)s,
        %(seq)s)
ON CONFLICT (attribution_id) DO NOTHING
"""


def insert_attribution(
    conn: psycopg.Connection,
    *,
    attribution_id: uuid.UUID,
    request_id: str,
    org_id: uuid.UUID,
    user_id: str,
    space_id: uuid.UUID | None,
    chain: str,
    seq: int,
) -> bool:
    """Insert the lookup row; False when the attribution id already has one (a redelivery)."""
    cursor = conn.execute(
        _INSERT_ATTRIBUTION,
        {
            "attribution_id": attribution_id,
            "request_id": request_id,
            "org_id": org_id,
            "user_id": user_id,
            "space_id": space_id,
            "chain": chain,
            "seq": seq,
        },
    )
    return cursor.rowcount == 1
