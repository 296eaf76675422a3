"""Link an AI response to the retrieval it used: a ``context_attribution_link`` entry in the
retrieval's chain plus an ``attribution_links`` row, in one transaction.

Idempotent: the entry's record id is uuid5(attributionId, responseId), and the attribution row is
locked first, so a retry or a concurrent duplicate finds the link and adds nothing (the record
holds ``linkedAt``, so a second append of the "same" link would otherwise differ and conflict).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import psycopg
from aws_lambda_powertools import Logger

from context_ledger.attribution.lookup import (
    LINK_CATEGORY,
    Attribution,
    AttributionNotFoundError,
    find_attribution,
    may_act_on,
)
from context_ledger.auth.principal import Principal
from context_ledger.evidence.canonical import format_timestamp
from context_ledger.evidence.chain import RecordConflictError, append
from context_ledger.evidence.keys import KeyRing

logger = Logger(child=True)

_LOCK_ATTRIBUTION = """
SELECT 1 FROM attributions
WHERE org_id = %(org_id)s AND attribution_id = %(attribution_id)s
FOR UPDATE
"""
_LINK_EXISTS = """
SELECT 1 FROM attribution_links
WHERE attribution_id = %(attribution_id)s AND response_id = %(response_id)s
"""
_INSERT_LINK = """
INSERT INTO attribution_links (attribution_id, response_id, chain, seq)
VALUES (%(attribution_id)s, %(response_id)s, %(chain)s, %(seq)s)
"""


def link_record_id(attribution_id: uuid.UUID, response_id: str) -> uuid.UUID:
    return uuid.uuid5(attribution_id, response_id)


def link_response(
    conn: psycopg.Connection,
    principal: Principal,
    *,
    attribution_id: uuid.UUID,
    response_id: str,
    keys: KeyRing,
) -> bool:
    """Record that ``response_id`` used the retrieval; False when it was already linked.

    Runs in the caller's transaction. The caller must be the owner or a space admin
    (``lookup.may_act_on``); auditors read but do not link.
    """
    attribution = find_attribution(
        conn, org_id=principal.org_id, attribution_id=attribution_id, keys=keys
    )
    if attribution is None or not may_act_on(conn, principal, attribution):
        raise AttributionNotFoundError()
    return append_link(
        conn, attribution, response_id=response_id, linked_by=principal.user_id, keys=keys
    )


def append_link(
    conn: psycopg.Connection,
    attribution: Attribution,
    *,
    response_id: str,
    linked_by: str,
    keys: KeyRing,
) -> bool:
    """Append the link entry and row for an attribution the caller was allowed to link.

    Runs in the caller's transaction; False when ``response_id`` was already linked. Callers
    decide who may link (this endpoint: ``may_act_on``; the model gateway: its own rule).
    """
    params = {
        "org_id": attribution.org_id,
        "attribution_id": attribution.attribution_id,
        "response_id": response_id,
    }
    conn.execute(_LOCK_ATTRIBUTION, params)
    if conn.execute(_LINK_EXISTS, params).fetchone() is not None:
        return False
    try:
        result = append(
            conn,
            chain=attribution.chain,
            category=LINK_CATEGORY,
            record_id=link_record_id(attribution.attribution_id, response_id),
            org_id=attribution.org_id,
            record={
                "attributionId": str(attribution.attribution_id),
                "requestId": attribution.request_id,
                "responseId": response_id,
                "linkedBy": linked_by,
                "linkedAt": format_timestamp(datetime.now(UTC)),
            },
            keys=keys,
        )
    except RecordConflictError:
        # The chain holds this link already, but its row is gone or was edited: the link is
        # recorded (idempotent, as the API promises), and verification reports the row.
        logger.error(
            "link entry without its lookup row",
            attributionId=str(attribution.attribution_id),
            chain=attribution.chain,
        )
        return False
    conn.execute(_INSERT_LINK, {**params, "chain": attribution.chain, "seq": result.seq})
    return True
