"""Chain verification: the daily job over every chain (in full), a minutely sweep over the chains
appended to lately, and one chain on demand (the observability endpoint and
``context-ledger verify``); each ends with a new checkpoint when the chain verified.

A run checks the entries (all of them, or those after the newest *verification* checkpoint of the
external store: signed, outside the database, so the database cannot move the starting point),
that the chain still holds the store's newest checkpoint of any kind (evidence.anchor: a head
behind it is a cut tail), and, when given an ``index_check``, the lookup rows that point into the
chain (attribution.index_check). A verified run writes its checkpoint to the external store first
and to ``evidence_checkpoints`` second; that table only reports where runs ended, it decides
nothing. Every result is also logged with the checkpoint's seq and MAC. ``ChainVerifyFailures``
(namespace ``ContextLedger``) counts the chains that failed, zero included, so an alarm sees every
run.

Why a sweep: the writer checkpoints a busy chain every N appends and every
``KEYSTONE_EVIDENCE_CHECKPOINT_SECONDS``, but nothing follows the last append before a quiet spell;
the sweep (``rate(1 minute)`` in the template) verifies and checkpoints it. Entries newer than the
newest checkpoint can be cut undetected: that window is about a minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import psycopg
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from context_ledger.db import connection
from context_ledger.evidence.anchor import (
    INVALID_CHECKPOINT,
    STORE_UNAVAILABLE,
    check_anchor,
    check_checkpoint,
    first_failure,
)
from context_ledger.evidence.chain import (
    Checkpoint,
    VerifyResult,
    checkpoint,
    verify_from_checkpoint,
)
from context_ledger.evidence.checkpoint_store import (
    VERIFIED,
    CheckpointStore,
    CheckpointStoreError,
    InvalidCheckpointError,
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


#: How far back the sweep looks for appended chains: a sweep that failed or was skipped is
#: made up by the next ones for this long (and by the daily full run after that).
RECENT_SECONDS = 3600

# Chains whose newest entry is recent (the head's own entry, one primary-key read per chain).
_RECENT_CHAINS = """
SELECT head.chain FROM evidence_chain_heads AS head
JOIN evidence_chain AS entry ON entry.chain = head.chain AND entry.seq = head.seq
WHERE entry.created_at > now() - make_interval(secs => %(seconds)s)
ORDER BY head.chain
"""


@dataclass(frozen=True)
class IndexProblem:
    """A lookup row over the chain (``table``, its ``key``) that the entry at ``seq`` it points
    at does not back."""

    table: str
    key: str
    seq: int
    problem: str


class IndexCheck(Protocol):
    """The rows of other tables that point into ``chain`` (at ``from_seq`` or later) and
    disagree with their entries (attribution.index_check.check_lookup_rows)."""

    def __call__(
        self, conn: psycopg.Connection, *, chain: str, from_seq: int
    ) -> list[IndexProblem]: ...


def verify_all_chains(
    *, metrics: Metrics | None = None, batch: int = 1000, index_check: IndexCheck | None = None
) -> dict[str, Any]:
    """The daily run: verify every chain in full and checkpoint it; a summary with the failed
    chains in detail."""
    get_key_ring()  # no keys is a configuration error: fail the run, not every chain
    store = get_checkpoint_store()  # so is a missing store
    with connection() as conn:
        chains = list_chains(conn, store)
    return _run(
        chains, full=True, store=store, batch=batch, index_check=index_check, metrics=metrics
    )


def verify_recent_chains(
    *, metrics: Metrics | None = None, batch: int = 1000, index_check: IndexCheck | None = None
) -> dict[str, Any]:
    """The minutely sweep: verify the chains appended to in the last :data:`RECENT_SECONDS`
    from their newest verification checkpoint, and checkpoint them."""
    get_key_ring()
    store = get_checkpoint_store()
    with connection() as conn:
        rows = conn.execute(_RECENT_CHAINS, {"seconds": RECENT_SECONDS}).fetchall()
    chains = [row["chain"] for row in rows]
    return _run(
        chains, full=False, store=store, batch=batch, index_check=index_check, metrics=metrics
    )


def _run(
    chains: list[str],
    *,
    full: bool,
    store: CheckpointStore,
    batch: int,
    index_check: IndexCheck | None,
    metrics: Metrics | None,
) -> dict[str, Any]:
    checked = 0
    failures: list[dict[str, Any]] = []
    for chain in chains:
        verified = _verify_chain(
            chain, full=full, store=store, batch=batch, index_check=index_check
        )
        checked += verified.result.checked
        if not verified.ok:
            failures.append(
                {
                    "chain": chain,
                    "checked": verified.result.checked,
                    "firstBadSeq": verified.first_bad_seq,
                    "reason": verified.reason,
                }
            )
    if metrics is not None:
        metrics.add_metric(name=FAILURE_METRIC, unit=MetricUnit.Count, value=len(failures))
    return {"ok": not failures, "chains": len(chains), "checked": checked, "failures": failures}


def _verify_chain(
    chain: str, *, full: bool, store: CheckpointStore, batch: int, index_check: IndexCheck | None
) -> ChainVerification:
    """Verify one chain in its own transaction; an error fails this chain, not the run."""
    try:
        with connection() as conn:
            verified = verify_chain(
                conn,
                chain=chain,
                keys=get_key_ring(),
                full=full,
                store=store,
                batch=batch,
                index_check=index_check,
            )
    except Exception:
        logger.exception("evidence chain verification raised", chain=chain)
        failed = VerifyResult(chain, False, 0, None, "verification raised an error")
        return ChainVerification(result=failed, checkpoint=None)
    _log(verified)
    return verified


@dataclass(frozen=True)
class CheckpointInfo:
    seq: int
    created_at: datetime


@dataclass(frozen=True)
class ChainVerification:
    """The chain's own result, the lookup rows that disagree with it, and the table's latest
    checkpoint after the run."""

    result: VerifyResult
    checkpoint: CheckpointInfo | None
    index_problems: tuple[IndexProblem, ...] = ()

    @property
    def ok(self) -> bool:
        return self.result.ok and not self.index_problems

    @property
    def first_bad_seq(self) -> int | None:
        if not self.result.ok or not self.index_problems:
            return self.result.first_bad_seq
        return self.index_problems[0].seq

    @property
    def reason(self) -> str | None:
        if not self.result.ok or not self.index_problems:
            return self.result.reason
        first = self.index_problems[0]
        return (
            f"{len(self.index_problems)} lookup rows disagree with their entries (first: "
            f"{first.table} {first.key} at seq {first.seq}: {first.problem})"
        )


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
    index_check: IndexCheck | None = None,
) -> ChainVerification:
    """Verify ``chain`` (from the store's newest verification checkpoint, or from seq 1 when
    ``full`` or there is none) and against the store's newest checkpoint of any kind; when it
    verifies, checkpoint it (store first, then the table, in the caller's transaction).

    So a run never checkpoints a chain it has not walked since the last verification
    checkpoint, nor one whose head is behind any checkpoint.
    """
    store = store if store is not None else get_checkpoint_store()
    try:
        anchored = check_anchor(
            conn, chain=chain, keys=keys, store=store, reload_keys=refresh_key_ring
        )
        start, resumed = _resume_point(conn, store, chain=chain, keys=keys, full=full)
    except CheckpointStoreError as exc:
        logger.error("external checkpoint not readable", chain=chain, error=str(exc))
        anchored, start = VerifyResult(chain, False, 0, None, STORE_UNAVAILABLE), None
        resumed = None
    walked = verify_from_checkpoint(
        conn, chain=chain, keys=keys, point=start, batch=batch, reload_keys=refresh_key_ring
    )
    # On the same first bad seq the walk's reason is about the entry itself, so it wins; the
    # anchor's ("truncation against checkpoint") is the news when the walk found nothing.
    result = first_failure(walked, anchored, resumed) or walked
    from_seq = 1 if start is None else start.seq + 1
    problems = () if index_check is None else index_check(conn, chain=chain, from_seq=from_seq)
    if result.ok:
        _checkpoint(conn, store=store, keys=keys, verified=result)
    row = conn.execute(_LATEST_CHECKPOINT, {"chain": chain}).fetchone()
    latest = None if row is None else CheckpointInfo(row["seq"], row["created_at"])
    return ChainVerification(result=result, checkpoint=latest, index_problems=tuple(problems))


def _resume_point(
    conn: psycopg.Connection, store: CheckpointStore, *, chain: str, keys: KeyRing, full: bool
) -> tuple[Checkpoint | None, VerifyResult | None]:
    """Where an incremental run starts: the store's newest verification checkpoint, when the
    chain still holds it; and the failure when it does not. A full run, or one without such a
    checkpoint, starts from seq 1: a bad checkpoint never shortens a run."""
    if full:
        return None, None
    try:
        point = store.latest(chain, verified=True)
    except InvalidCheckpointError:
        return None, VerifyResult(chain, False, 0, None, INVALID_CHECKPOINT)
    failed = check_checkpoint(
        conn, chain=chain, keys=keys, anchor=point, reload_keys=refresh_key_ring
    )
    if point is None or failed is not None:
        return None, failed
    return Checkpoint(chain, point.seq, point.mac), None


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


def _log(verified: ChainVerification) -> None:
    """The runs' record of each chain; the logs leave the database, so the verified head's
    seq and MAC in them are one more anchor."""
    result = verified.result
    point = result.verified_head
    for problem in verified.index_problems[:20]:
        logger.error(
            "lookup row disagrees with its evidence entry",
            chain=result.chain,
            table=problem.table,
            key=problem.key,
            seq=problem.seq,
            problem=problem.problem,
        )
    if verified.ok:
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
            firstBadSeq=verified.first_bad_seq,
            reason=verified.reason,
        )
