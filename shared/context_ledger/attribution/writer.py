"""The attribution writer: attribution events from SQS become evidence chain entries.

**One chain per organisation** (``org:<orgId>``), not one global chain:

- a tenant's evidence verifies and exports on its own, with no other tenant's entries in it;
- appends serialise on their chain's head row, so tenants never queue behind each other and
  throughput grows with the number of organisations rather than being capped by one lock;
- a damaged entry marks one organisation's chain, not everyone's.

What is given up is a single total order across organisations, which no reader needs: every
record belongs to exactly one organisation.

**Delivery.** SQS delivers at least once. The entry and the ``attributions`` lookup row are
written in one transaction, and the entry is idempotent on ``recordId``: a message processed again
(a crash after commit but before the batch was acknowledged, or a visibility timeout) finds its
entry and adds nothing. A body that is not a valid event is a poison message: the handler raises,
the batch reports it as failed, and after the queue's ``maxReceiveCount`` it moves to the
dead-letter queue. It is logged by message id and validation problem, never by content.

**Database down.** A record that finds the database unreachable fails (and comes back after the
visibility timeout, losing nothing). So do the records after it for the next
:data:`DATABASE_DOWN_SECONDS`, at once: waiting the pool's checkout timeout for each record of a
batch of ten would outlast the function's own timeout.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import ValidationError

from context_ledger.attribution.events import AttributionEvent
from context_ledger.attribution.records import insert_attribution
from context_ledger.cooldown import Cooldown
from context_ledger.db import connection
from context_ledger.db.pool import is_unavailable
from context_ledger.errors import ServiceUnavailableError
from context_ledger.evidence.chain import AppendResult, append, mac_at
from context_ledger.evidence.checkpoint_store import checkpoint_if_due
from context_ledger.evidence.keys import KeyRing, get_key_ring

logger = Logger(child=True)


#: How long, after a record found the database unreachable, later records fail without trying.
DATABASE_DOWN_SECONDS = 5.0

_database_down = Cooldown()


class InvalidAttributionEventError(ValueError):
    """A message body is not a valid attribution event (a poison message)."""


class DatabaseDownError(ServiceUnavailableError):
    """The database was unreachable a moment ago: this record is left for redelivery."""


def parse_event(body: str) -> AttributionEvent:
    """The event in ``body``; the error names the problems, never the values."""
    try:
        return AttributionEvent.model_validate_json(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['type']}"
            for error in exc.errors(include_url=False, include_input=False)
        )
        raise InvalidAttributionEventError(f"invalid attribution event: {problems}") from None


def write_attribution(
    conn: psycopg.Connection, *, event: AttributionEvent, keys: KeyRing
) -> AppendResult:
    """Append the event to its organisation's chain and index it, in the caller's transaction."""
    record = event.record
    result = append(
        conn,
        chain=event.chain,
        category=event.category,
        record_id=event.record_id,
        org_id=event.org_id,
        record=event.record_data(),
        keys=keys,
    )
    indexed = insert_attribution(
        conn,
        attribution_id=record.attribution_id,
        request_id=record.request_id,
        org_id=event.org_id,
        user_id=record.user_id,
        space_id=record.space_id,
        chain=event.chain,
        seq=result.seq,
    )
    if result.created and not indexed:
        # The publisher reused an attribution id under a new record id: the entry is kept as
        # evidence, but lookups keep answering with the first one.
        logger.warning(
            "attribution id already indexed under another entry",
            attributionId=str(record.attribution_id),
            chain=event.chain,
            seq=result.seq,
        )
    return result


def _mac_at(chain: str) -> Callable[[int], bytes | None]:
    """The chain's MAC at a seq, read on a connection of its own (the append's has committed)."""

    def read(seq: int) -> bytes | None:
        with connection() as conn:
            return mac_at(conn, chain=chain, seq=seq)

    return read


def record_handler(record: SQSRecord) -> AppendResult:
    """Process one SQS message; raising marks it failed in the batch response."""
    try:
        event = parse_event(record.body)
    except InvalidAttributionEventError as exc:
        logger.error(
            "poison attribution message",
            messageId=record.message_id,
            receiveCount=record.attributes.approximate_receive_count,
            problems=str(exc),
        )
        raise
    keys = get_key_ring()
    if _database_down.active():
        raise DatabaseDownError("the database was unreachable moments ago; left for redelivery")
    try:
        with connection() as conn:
            result = write_attribution(conn, event=event, keys=keys)
    except Exception as exc:
        if is_unavailable(exc):
            _database_down.start(DATABASE_DOWN_SECONDS)
        raise
    # After the commit: a checkpoint outside the database every N appends and every S seconds
    # (evidence.checkpoint_store), of a chain that still holds the newest one.
    checkpoint_if_due(
        chain=event.chain, seq=result.seq, mac=result.mac, keys=keys, mac_at=_mac_at(event.chain)
    )
    logger.info(
        "attribution recorded",
        messageId=record.message_id,
        recordId=str(event.record_id),
        chain=event.chain,
        seq=result.seq,
        newEntry=result.created,
    )
    return result
