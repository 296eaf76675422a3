"""Chain verification: the daily job over every chain, and one chain on demand (the
observability endpoint and ``context-ledger verify``), each from its last checkpoint, then a new
checkpoint.

Each run checks the entries appended since the previous run and that the checkpointed entry is
unchanged, so its cost follows the day's volume, not the chain's length. Every result is logged
with the checkpoint's seq and MAC: the logs leave the database, so they anchor the chain against
someone who could rewrite the database tables themselves. ``ChainVerifyFailures`` (namespace
``ContextLedger``) counts the chains that failed, zero included, so an alarm sees every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from context_ledger.db import connection
from context_ledger.evidence.chain import VerifyResult, checkpoint, verify, verify_from_checkpoint
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


def list_chains(conn: psycopg.Connection) -> list[str]:
    return [row["chain"] for row in conn.execute(_CHAINS).fetchall()]


def verify_all_chains(*, metrics: Metrics | None = None, batch: int = 1000) -> dict[str, Any]:
    """Verify and checkpoint every chain; a summary with the failed chains in detail."""
    get_key_ring()  # no keys is a configuration error: fail the run, not every chain
    with connection() as conn:
        chains = list_chains(conn)
    checked = 0
    failures: list[dict[str, Any]] = []
    for chain in chains:
        result = _verify_chain(chain, batch=batch)
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


def _verify_chain(chain: str, *, batch: int) -> VerifyResult:
    """Verify one chain in its own transaction; an error fails this chain, not the run."""
    try:
        with connection() as conn:
            result = verify_from_checkpoint(
                conn, chain=chain, keys=get_key_ring(), batch=batch, reload_keys=refresh_key_ring
            )
            point = checkpoint(conn, verified=result) if result.ok else None
    except Exception:
        logger.exception("evidence chain verification raised", chain=chain)
        return VerifyResult(chain, False, 0, None, "verification raised an error")
    if result.ok:
        logger.info(
            "evidence chain verified",
            chain=chain,
            ok=True,
            checked=result.checked,
            checkpointSeq=None if point is None else point.seq,
            checkpointMac=None if point is None else point.mac.hex(),
        )
    else:
        logger.error(
            "evidence chain verification failed",
            chain=chain,
            ok=False,
            checked=result.checked,
            firstBadSeq=result.first_bad_seq,
            reason=result.reason,
        )
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
    conn: psycopg.Connection, *, chain: str, keys: KeyRing, full: bool = False
) -> ChainVerification:
    """Verify ``chain`` (from its last checkpoint, or from seq 1 when ``full``) and, when it
    verifies, checkpoint it in the caller's transaction; returns the latest checkpoint."""
    if full:
        result = verify(conn, chain=chain, keys=keys, reload_keys=refresh_key_ring)
    else:
        result = verify_from_checkpoint(conn, chain=chain, keys=keys, reload_keys=refresh_key_ring)
    if result.ok:
        checkpoint(conn, verified=result)
    row = conn.execute(_LATEST_CHECKPOINT, {"chain": chain}).fetchone()
    latest = None if row is None else CheckpointInfo(row["seq"], row["created_at"])
    return ChainVerification(result=result, checkpoint=latest)
