"""A chain against its newest external checkpoint (evidence.checkpoint_store).

The checks a chain cannot make on itself:

- **truncation against checkpoint**: the store names seq N, the chain ends before N. A removed
  tail with its head row moved back, or the whole database restored from an older backup.
- **rolled back against checkpoint**: entry N exists with another MAC. The database was restored
  to before N and has been appended to since; its entries from the restore point on are not the
  ones that were checkpointed.
- **checkpoint rolled back**: the database's own checkpoint table is ahead of the store's newest
  checkpoint. A verification run writes the store first and its table row second, so this only
  happens when checkpoints went missing from the store.

A chain without any external checkpoint (a new chain, or checkpoints taken before the store
existed) has nothing to compare; its first verification writes one.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from context_ledger.evidence.chain import MISSING, VerifyResult
from context_ledger.evidence.checkpoint_store import (
    CheckpointStore,
    InvalidCheckpointError,
    SignedCheckpoint,
)
from context_ledger.evidence.keys import KeyRing

TRUNCATED = "truncation against checkpoint"
REWRITTEN = "rolled back against checkpoint"
STORE_ROLLED_BACK = "checkpoint rolled back"
INVALID_CHECKPOINT = "the external checkpoint is invalid or its signature does not verify"
STORE_UNAVAILABLE = "the external checkpoint store is unavailable"

# One snapshot: the checkpointed entry, where the chain ends, the database's newest checkpoint.
# (LIMIT 1: a duplicated seq is the walk's to report, not a reason to raise here.)
_STATE = """
SELECT (SELECT mac FROM evidence_chain WHERE chain = %(chain)s AND seq = %(seq)s
        ORDER BY mac LIMIT 1) AS mac,
       (SELECT max(seq) FROM evidence_chain WHERE chain = %(chain)s) AS last_seq,
       (SELECT max(seq) FROM evidence_checkpoints WHERE chain = %(chain)s) AS checkpoint_seq
"""


def check_anchor(
    conn: psycopg.Connection,
    *,
    chain: str,
    keys: KeyRing,
    store: CheckpointStore,
    reload_keys: Callable[[], KeyRing] | None = None,
) -> VerifyResult | None:
    """The failure when ``chain`` disagrees with the store's newest checkpoint, else None.

    Raises CheckpointStoreError when the store cannot be read.
    """
    try:
        anchor = store.latest(chain)
    except InvalidCheckpointError:
        return VerifyResult(chain, False, 0, None, INVALID_CHECKPOINT)
    return check_checkpoint(conn, chain=chain, keys=keys, anchor=anchor, reload_keys=reload_keys)


def check_checkpoint(
    conn: psycopg.Connection,
    *,
    chain: str,
    keys: KeyRing,
    anchor: SignedCheckpoint | None,
    reload_keys: Callable[[], KeyRing] | None = None,
) -> VerifyResult | None:
    """The failure when ``chain`` disagrees with the external checkpoint ``anchor`` (or its
    signature does not verify), else None; no checkpoint, nothing to disagree with."""
    if anchor is None:
        return None
    valid = anchor.signature_valid(keys)
    if not valid and reload_keys is not None:
        valid = anchor.signature_valid(reload_keys())
    if not valid:
        return VerifyResult(chain, False, 0, None, INVALID_CHECKPOINT)
    state = conn.execute(_STATE, {"chain": chain, "seq": anchor.seq}).fetchone()
    if state["mac"] is None:
        last_seq = state["last_seq"] or 0
        if last_seq < anchor.seq:
            return VerifyResult(chain, False, 0, last_seq + 1, TRUNCATED)
        return VerifyResult(chain, False, 0, anchor.seq, MISSING)
    if bytes(state["mac"]) != anchor.mac:
        return VerifyResult(chain, False, 0, anchor.seq, REWRITTEN)
    if state["checkpoint_seq"] is not None and state["checkpoint_seq"] > anchor.seq:
        return VerifyResult(chain, False, 0, anchor.seq + 1, STORE_ROLLED_BACK)
    return None


def first_failure(*results: VerifyResult | None) -> VerifyResult | None:
    """The failure with the lowest first bad seq (one without a seq last); None when all pass.

    On a tie the earlier argument wins, so callers pass the more telling check first.
    """
    failures = [r for r in results if r is not None and not r.ok]
    if not failures:
        return None
    return min(
        failures,
        key=lambda r: (r.first_bad_seq is None, r.first_bad_seq or 0),
    )
