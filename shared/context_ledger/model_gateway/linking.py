"""The link between a model call and the retrieval it used (spec: "Joining a model call to its
retrieval").

After the provider answers, the named id is looked up among the caller's organisation's records,
first as an ``attributionId`` (when it is a UUID), then as a ``requestId``. The writer records
retrievals asynchronously, so an id with no record yet is polled for up to
``KEYSTONE_MODELS_CONTEXT_LINK_WAIT_MS``: an id of the shapes the service gives (a UUID, a
``req_`` request id) is; any other is looked up once, since no record of it can be on its way,
and the caller's answer does not wait the whole wait for nothing. Then:

- ``linked``: the caller is a person and the retrieval is theirs, or they hold ``audit:read``;
  every such record of the request gets a ``context_attribution_link`` entry in its chain with
  the gateway request id as the response id (idempotent, ``attribution.links.append_link``);
- ``denied``: the caller is not a person, or every record is another person's and the caller
  is no auditor;
- ``not_found``: no record of the organisation had that id when the wait ran out;
- ``error``: the records could not be read or written (database, keys).

Nothing here raises: a failed link never fails or changes the model call. Every attempt is
audited as one ``models.gateway.context_link`` log line (outcome, ids, latency) on a logger that
logs at INFO whatever ``POWERTOOLS_LOG_LEVEL`` says, so a quiet deployment keeps its audit trail.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from enum import StrEnum

import psycopg
from aws_lambda_powertools import Logger

from context_ledger.attribution.events import REQUEST_ID
from context_ledger.attribution.links import append_link
from context_ledger.attribution.lookup import (
    Attribution,
    find_attribution,
    find_request_attributions,
)
from context_ledger.auth.principal import SCOPE_AUDIT_READ, Principal
from context_ledger.db import get_pool
from context_ledger.evidence.keys import KeyRing, get_key_ring

AUDIT_EVENT = "models.gateway.context_link"
POLL_INTERVAL_SECONDS = 0.05
#: Bounds on one link transaction: the caller's answer waits for it.
POOL_TIMEOUT_SECONDS = 2.0
LOCK_TIMEOUT_MS = 1000
STATEMENT_TIMEOUT_MS = 2000

audit_logger = Logger(child=True, level="INFO")

Connect = Callable[[], AbstractContextManager[psycopg.Connection]]


class LinkOutcome(StrEnum):
    LINKED = "linked"
    NOT_FOUND = "not_found"
    DENIED = "denied"
    ERROR = "error"


@dataclass(frozen=True)
class LinkResult:
    outcome: LinkOutcome
    latency_ms: int
    attribution_ids: tuple[uuid.UUID, ...] = ()


@contextmanager
def pooled_connection() -> Iterator[psycopg.Connection]:
    """A pooled connection in a transaction, waiting at most POOL_TIMEOUT_SECONDS for one."""
    with get_pool().connection(timeout=POOL_TIMEOUT_SECONDS) as conn:
        yield conn


def may_link(principal: Principal, attribution: Attribution) -> bool:
    """A person linking their own retrieval, or an auditor; never a service."""
    if not principal.is_person:
        return False
    return principal.user_id == attribution.user_id or principal.has_scope(SCOPE_AUDIT_READ)


def _attribution_id(context_request_id: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(context_request_id)
    except ValueError:
        return None


def _may_be_recorded(context_request_id: str) -> bool:
    """Whether a record of this id can be on its way: an id of a shape the service gives."""
    return bool(
        REQUEST_ID.fullmatch(context_request_id) or _attribution_id(context_request_id) is not None
    )


def _records(
    conn: psycopg.Connection, org_id: uuid.UUID, context_request_id: str, keys: KeyRing
) -> list[Attribution]:
    attribution_id = _attribution_id(context_request_id)
    if attribution_id is not None:
        found = find_attribution(conn, org_id=org_id, attribution_id=attribution_id, keys=keys)
        if found is not None:
            return [found]
    return find_request_attributions(conn, org_id=org_id, request_id=context_request_id, keys=keys)


def retrieval_names(
    conn: psycopg.Connection, *, org_id: uuid.UUID, context_request_id: str, keys: KeyRing
) -> frozenset[str]:
    """Every id a model call may have named the same retrieval by: ``context_request_id``
    itself and the ``requestId`` and ``attributionId`` of each record it resolves to, as a link
    resolves it (spec: a call names "the requestId (or attributionId) of the retrieval"). An id
    without a record (yet) names only itself."""
    names = {context_request_id}
    for attribution in _records(conn, org_id, context_request_id, keys):
        names |= {attribution.request_id, str(attribution.attribution_id)}
    return frozenset(names)


def _bound(conn: psycopg.Connection) -> None:
    conn.execute(
        "SELECT set_config('lock_timeout', %(lock)s, true),"
        " set_config('statement_timeout', %(statement)s, true)",
        {"lock": f"{LOCK_TIMEOUT_MS}ms", "statement": f"{STATEMENT_TIMEOUT_MS}ms"},
    )


def _attempt(
    principal: Principal,
    *,
    context_request_id: str,
    response_id: str,
    wait_ms: int,
    connect: Connect,
    keys: Callable[[], KeyRing],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> tuple[LinkOutcome, tuple[uuid.UUID, ...]]:
    deadline = clock() + (wait_ms / 1000 if _may_be_recorded(context_request_id) else 0)
    while True:
        with connect() as conn:
            _bound(conn)
            ring = keys()
            found = _records(conn, principal.org_id, context_request_id, ring)
            if found:
                allowed = [a for a in found if may_link(principal, a)]
                if not allowed:
                    return LinkOutcome.DENIED, tuple(a.attribution_id for a in found)
                for attribution in allowed:
                    append_link(
                        conn,
                        attribution,
                        response_id=response_id,
                        linked_by=principal.user_id,
                        keys=ring,
                    )
                return LinkOutcome.LINKED, tuple(a.attribution_id for a in allowed)
        remaining = deadline - clock()
        if remaining <= 0:
            return LinkOutcome.NOT_FOUND, ()
        sleep(min(POLL_INTERVAL_SECONDS, remaining))


def link_retrieval(
    principal: Principal,
    *,
    context_request_id: str,
    response_id: str,
    wait_ms: int,
    connect: Connect = pooled_connection,
    keys: Callable[[], KeyRing] = get_key_ring,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> LinkResult:
    """Resolve ``context_request_id`` and link ``response_id`` to it; never raises."""
    started = clock()
    try:
        outcome, ids = _attempt(
            principal,
            context_request_id=context_request_id,
            response_id=response_id,
            wait_ms=wait_ms,
            connect=connect,
            keys=keys,
            clock=clock,
            sleep=sleep,
        )
        problem = None
    except Exception as exc:  # any failure is the `error` outcome, never the caller's
        outcome, ids, problem = LinkOutcome.ERROR, (), type(exc).__name__
    result = LinkResult(outcome, round((clock() - started) * 1000), ids)
    audit_logger.info(
        AUDIT_EVENT,
        extra={
            "audit": AUDIT_EVENT,
            "outcome": result.outcome.value,
            "orgId": str(principal.org_id),
            "userId": principal.user_id,
            "principalKind": principal.kind.value,
            "contextRequestId": context_request_id,
            "gatewayRequestId": response_id,
            "attributionIds": [str(a) for a in result.attribution_ids],
            "latencyMs": result.latency_ms,
            "problem": problem,
        },
    )
    return result
