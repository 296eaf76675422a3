"""What a retrieval may deliver of a source, by the organisation's DLP action (README, "DLP").

- ``allow``: chunks are delivered as stored;
- ``redact``: chunks are delivered redacted with the organisation's rules;
- ``drop``: chunks are delivered, redacted, only to callers cleared for the source — those holding
  ``context:space:admin`` on its space (``context:admin`` holders, and a personal space's owner);
  for everyone else the source does not exist in retrieval;
- ``block_source``: chunks are never delivered, to anyone.

Sources that may not be delivered are left out before the search, so they take no per-level slot
and no budget, and a caller cannot learn from scores that they exist.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from context_ledger.dlp.gate import DlpScanFailedError, redactor_for
from context_ledger.dlp.policy import DlpAction, DlpPolicy
from context_ledger.dlp.redaction import ScanError
from context_ledger.log import logger
from context_ledger.sources.chunking.tokens import count_tokens


def may_deliver(action: DlpAction, *, cleared: bool) -> bool:
    """Whether chunks of a source with this action reach a caller (cleared or not)."""
    if action is DlpAction.BLOCK_SOURCE:
        return False
    if action is DlpAction.DROP:
        return cleared
    return True


@dataclass(frozen=True)
class DeliveredText:
    """A chunk's text as the caller receives it, with the hash and size the evidence records."""

    content: str
    sha256: bytes
    tokens: int


def delivered_text(
    policy: DlpPolicy, action: DlpAction, *, content: str, sha256: bytes, tokens: int
) -> DeliveredText:
    """The chunk as delivered: redacted unless its action is ``allow``.

    The stored hash and token count are kept when redaction changed nothing (the usual case), so
    only chunks that held something to redact are hashed and counted again.
    """
    if action is DlpAction.ALLOW:
        return DeliveredText(content, sha256, tokens)
    try:
        redacted = redactor_for(policy.patterns).redact(content).text
    except ScanError as exc:
        logger.error("DLP scan failed at delivery; nothing delivered", extra={"problem": str(exc)})
        raise DlpScanFailedError() from None
    if redacted == content:
        return DeliveredText(content, sha256, tokens)
    return DeliveredText(
        redacted, hashlib.sha256(redacted.encode()).digest(), count_tokens(redacted)
    )
