"""Chain verification: the daily job over every chain, and one chain on demand (the
observability endpoint and ``context-ledger verify``), each from its last checkpoint, then a new
checkpoint.

Each run checks the entries appended since the previous run, that the checkpointed entry is
unchanged, and that the chain still holds the newest checkpoint of the external store
(evidence.anchor), so its cost follows the day's volume, not the chain's length. A verified run
writes its checkpoint to the external store first and to ``evidence_checkpoints`` second: the
database never holds a checkpoint the store lacks, which is what makes a store that lost
checkpoints visible. Every result is also logged with the checkpoint's seq and MAC.
``ChainVerifyFailures`` (namespace ``ContextLedger``) counts the chains that failed, zero
included, so an alarm sees every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from context_ledger.db import connection
from context_ledger.evidence.anchor import STORE_UNAVAILABLE, check_anchor, first_failure
from context_ledger.evidence.chain import (
    VerifyResult,
    checkpoint,
    verify,
    verify_from_checkpoint,
)
from context_ledger.evidence.checkpoint_store import (
    VERIFIED,
    CheckpointStore,
    CheckpointStoreError,
    get_checkpoint_store,
    sign_checkpoint,
)
from context_ledger.evidence.keys import KeyRing, get_key_ring, refresh_key_ring

logger = Logger(child=True)

METRICS_NAMESPACE = "ContextLedger"
FAILURE_METRIC = "ChainVerifyFailures"

# A chain whose head row went missing still has checkpoints, so it is still verified (and fails).
_CHAINS = """
SELECT chain FROM evidence_chain_heads
UNION
SELECT chain FROM evidence_checkpoints
ORDER BY chain
"""


def list_chains(conn: psycopg.Connection, store: CheckpointStore | None = None) -> list[str]:
    """The chains the database knows, and those only the external store still remembers (a
    chain whose every row was removed, or that a restored backup predates)."""
    chains = {row["chain"] for row in conn.execute(_CHAINS).fetchall()}
    if store is not None:
        try:
            chains.update(store.chains())
        except CheckpointStoreError as exc:
            logger.error("external checkpoints could not be listed", error=str(exc))
    return sorted(chains)


def verify_all_chains(*, metrics: Metrics | None = None, batch: int = 1000) -> dict[str, Any]:
    """Verify and checkpoint every chain; a summary with the failed chains in detail."""
    get_key_ring()  # no keys is a configuration error: fail the run, not every chain
    store = get_checkpoint_store()  # so is a missing store
    with connection() as conn:
        chains = list_chains(conn, store)
    checked = 0
    failures: list[dict[str, Any]] = []
    for chain in chains:
        result = _verify_chain(chain, store=store, batch=batch)
        checked += result.checked
        if not result.ok:
            failures.append(
                {
                    "chain": chain,
                    "checked": result.checked,
                    "firstBadSeq": result.first_bad_seq,
                    "reason": result.reason,
                }
            )
    if metrics is not None:
        metrics.add_metric(name=FAILURE_METRIC, unit=MetricUnit.Count, value=len(failures))
    return {"ok": not failures, "chains": len(chains), "checked": checked, "failures": failures}


def _verify_chain(chain: str, *, store: CheckpointStore, batch: int) -> VerifyResult:
    """Verify one chain in its own transaction; an error fails this chain, not the run."""
    try:
        with connection() as conn:
            result = verify_chain(
                conn, chain=chain, keys=get_key_ring(), store=store, batch=batch
            ).result
    except Exception:
        logger.exception("evidence chain verification raised", chain=chain)
        return VerifyResult(chain, False, 0, None, "verification raised an error")
    _log(result)
    return result


@dataclass(frozen=True)
class CheckpointInfo:
    seq: int
    created_at: datetime


@dataclass(frozen=True)
class ChainVerification:
    result: VerifyResult
    checkpoint: CheckpointInfo | None


_LATEST_CHECKPOINT = """
SELECT seq, created_at FROM evidence_checkpoints
WHERE chain = %(chain)s
ORDER BY seq DESC
LIMIT 1
"""


def verify_chain(
    conn: psycopg.Connection,
    *,
    chain: str,
    keys: KeyRing,
    full: bool = False,
    store: CheckpointStore | None = None,
    batch: int = 1000,
) -> ChainVerification:
    """Verify ``chain`` (from its last checkpoint, or from seq 1 when ``full``) and against the
    external store's newest checkpoint; when it verifies, checkpoint it (store first, then the
    table, in the caller's transaction). Returns the result and the table's latest checkpoint."""
    store = store if store is not None else get_checkpoint_store()
    try:
        anchored = check_anchor(
            conn, chain=chain, keys=keys, store=store, reload_keys=refresh_key_ring
        )
    except CheckpointStoreError as exc:
        logger.error("external checkpoint not readable", chain=chain, error=str(exc))
        anchored = VerifyResult(chain, False, 0, None, STORE_UNAVAILABLE)
    if full:
        walked = verify(conn, chain=chain, keys=keys, batch=batch, reload_keys=refresh_key_ring)
    else:
        walked = verify_from_checkpoint(
            conn, chain=chain, keys=keys, batch=batch, reload_keys=refresh_key_ring
        )
    # On the same first bad seq the walk's reason is about the entry itself, so it wins; the
    # anchor's ("truncation against checkpoint") is the news when the walk found nothing.
    result = first_failure(walked, anchored) or walked
    if result.ok:
        _checkpoint(conn, store=store, keys=keys, verified=result)
    row = conn.execute(_LATEST_CHECKPOINT, {"chain": chain}).fetchone()
    latest = None if row is None else CheckpointInfo(row["seq"], row["created_at"])
    return ChainVerification(result=result, checkpoint=latest)


def _checkpoint(
    conn: psycopg.Connection, *, store: CheckpointStore, keys: KeyRing, verified: VerifyResult
) -> None:
    """Store the verified head outside, then in the table; nothing in the table if the store
    refused (the next run verifies from the previous checkpoint instead)."""
    head = verified.verified_head
    if head is None:
        return
    signed = sign_checkpoint(
        chain=head.chain,
        seq=head.seq,
        mac=head.mac,
        kind=VERIFIED,
        keys=keys,
        now=datetime.now(UTC),
    )
    try:
        store.put(signed)
    except CheckpointStoreError as exc:
        logger.error("external checkpoint not written", chain=head.chain, error=str(exc))
        return
    checkpoint(conn, verified=verified)


def _log(result: VerifyResult) -> None:
    """The daily run's record of each chain; the logs leave the database, so the verified head's
    seq and MAC in them are one more anchor."""
    point = result.verified_head
    if result.ok:
        logger.info(
            "evidence chain verified",
            chain=result.chain,
            ok=True,
            checked=result.checked,
            checkpointSeq=None if point is None else point.seq,
            checkpointMac=None if point is None else point.mac.hex(),
        )
    else:
        logger.error(
            "evidence chain verification failed",
            chain=result.chain,
            ok=False,
            checked=result.checked,
            firstBadSeq=result.first_bad_seq,
            reason=result.reason,
        )
