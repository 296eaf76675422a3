"""The model call log: one ``model_logs`` row per call the gateway forwarded.

Listing follows the compliance-evidence style: newest first, ``limit`` (default 50, at most 500)
and an opaque cursor (``evidence.listing.Position`` over ``created_at`` and the row's ``seq``).
A caller sees their own calls; an ``audit:read`` holder sees all of the organisation's. Rows are
always selected by the caller's organisation, so another organisation's calls never show. A
retrieval filter matches the calls that named it by either of its ids: a row keeps the id its call
sent, and the ids are joined when the log is read, so a call made before its record was written
(``not_found``) is found too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import psycopg

from context_ledger.auth.principal import SCOPE_AUDIT_READ, Principal
from context_ledger.evidence.keys import KeyRing, get_key_ring
from context_ledger.evidence.listing import DEFAULT_LIMIT, MAX_LIMIT, Position
from context_ledger.model_gateway.linking import LinkOutcome, retrieval_names
from context_ledger.model_gateway.provider import Endpoint
from context_ledger.model_gateway.usage import TokenUsage


@dataclass(frozen=True)
class ModelCall:
    gateway_request_id: uuid.UUID
    org_id: uuid.UUID
    user_id: str
    client_id: str | None
    client_name: str | None
    client_version: str | None
    endpoint: Endpoint
    model: str | None
    stream: bool
    status: int
    latency_ms: int
    usage: TokenUsage | None
    context_request_id: str | None
    link_outcome: LinkOutcome | None
    link_latency_ms: int | None


@dataclass(frozen=True)
class LoggedCall:
    call: ModelCall
    created_at: datetime
    seq: int


@dataclass(frozen=True)
class CallPage:
    calls: list[LoggedCall]
    next_position: Position | None


_INSERT = """
INSERT INTO model_logs (id, org_id, user_id, client_id, client_name, client_version, endpoint,
                        model, stream, status, latency_ms, prompt_tokens, completion_tokens,
                        total_tokens, context_request_id, link_outcome, link_latency_ms)
VALUES (%(id)s, %(org_id)s, %(user_id)s, %(client_id)s, %(client_name)s, %(client_version)s,
        %(endpoint)s, %(model)s, %(stream)s, %(status)s, %(latency_ms)s, %(prompt_tokens)s,
        %(completion_tokens)s, %(total_tokens)s, %(context_request_id)s, %(link_outcome)s,
        %(link_latency_ms)s)
"""

# Optional filters are NULL when unset, so the statement stays one constant.
_LIST = """
SELECT id, org_id, user_id, client_id, client_name, client_version, endpoint, model, stream,
       status, latency_ms, prompt_tokens, completion_tokens, total_tokens, context_request_id,
       link_outcome, link_latency_ms, created_at, seq
FROM model_logs
WHERE org_id = %(org_id)s
  AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s)
  AND (%(context_request_ids)s::text[] IS NULL
       OR context_request_id = ANY(%(context_request_ids)s::text[]))
  AND (%(after_created_at)s::timestamptz IS NULL
       OR (created_at, seq) < (%(after_created_at)s, %(after_seq)s))
ORDER BY created_at DESC, seq DESC
LIMIT %(limit)s
"""


def record_call(conn: psycopg.Connection, call: ModelCall) -> None:
    usage = call.usage or TokenUsage(None, None, None)
    conn.execute(
        _INSERT,
        {
            "id": call.gateway_request_id,
            "org_id": call.org_id,
            "user_id": call.user_id,
            "client_id": call.client_id,
            "client_name": call.client_name,
            "client_version": call.client_version,
            "endpoint": call.endpoint.value,
            "model": call.model,
            "stream": call.stream,
            "status": call.status,
            "latency_ms": call.latency_ms,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "context_request_id": call.context_request_id,
            "link_outcome": None if call.link_outcome is None else call.link_outcome.value,
            "link_latency_ms": call.link_latency_ms,
        },
    )


def _logged(row: dict) -> LoggedCall:
    usage = TokenUsage(row["prompt_tokens"], row["completion_tokens"], row["total_tokens"])
    call = ModelCall(
        gateway_request_id=row["id"],
        org_id=row["org_id"],
        user_id=row["user_id"],
        client_id=row["client_id"],
        client_name=row["client_name"],
        client_version=row["client_version"],
        endpoint=Endpoint(row["endpoint"]),
        model=row["model"],
        stream=row["stream"],
        status=row["status"],
        latency_ms=row["latency_ms"],
        usage=None if usage == TokenUsage(None, None, None) else usage,
        context_request_id=row["context_request_id"],
        link_outcome=None if row["link_outcome"] is None else LinkOutcome(row["link_outcome"]),
        link_latency_ms=row["link_latency_ms"],
    )
    return LoggedCall(call=call, created_at=row["created_at"], seq=row["seq"])


def list_calls(
    conn: psycopg.Connection,
    principal: Principal,
    *,
    context_request_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
    after: Position | None = None,
    keys: Callable[[], KeyRing] = get_key_ring,
) -> CallPage:
    """One page of the calls the caller may see, newest first; with ``context_request_id``,
    those that named that retrieval by either of its ids, its ``requestId`` or its
    ``attributionId`` (linking.retrieval_names reads its records, whose MACs need ``keys``)."""
    limit = max(1, min(limit, MAX_LIMIT))
    names = (
        None
        if context_request_id is None
        else retrieval_names(
            conn, org_id=principal.org_id, context_request_id=context_request_id, keys=keys()
        )
    )
    rows = conn.execute(
        _LIST,
        {
            "org_id": principal.org_id,
            "user_id": None if principal.has_scope(SCOPE_AUDIT_READ) else principal.user_id,
            "context_request_ids": None if names is None else sorted(names),
            "after_created_at": None if after is None else after.created_at,
            "after_seq": None if after is None else after.seq,
            "limit": limit + 1,
        },
    ).fetchall()
    calls = [_logged(row) for row in rows[:limit]]
    last = calls[-1] if len(rows) > limit else None
    return CallPage(
        calls=calls, next_position=None if last is None else Position(last.created_at, last.seq)
    )
