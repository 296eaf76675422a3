"""The HMAC evidence chain: canonical record encoding, keys, append, verify and checkpoints."""

from context_ledger.evidence.canonical import CanonicalEncodingError, canonical_bytes
from context_ledger.evidence.chain import (
    AppendResult,
    ChainError,
    Checkpoint,
    RecordConflictError,
    VerifyResult,
    append,
    checkpoint,
    org_chain,
    verify,
    verify_from_checkpoint,
)
from context_ledger.evidence.keys import KeyRing, KeyRingError, get_key_ring, refresh_key_ring

__all__ = [
    "AppendResult",
    "CanonicalEncodingError",
    "ChainError",
    "Checkpoint",
    "KeyRing",
    "KeyRingError",
    "RecordConflictError",
    "VerifyResult",
    "append",
    "canonical_bytes",
    "checkpoint",
    "get_key_ring",
    "org_chain",
    "refresh_key_ring",
    "verify",
    "verify_from_checkpoint",
]
