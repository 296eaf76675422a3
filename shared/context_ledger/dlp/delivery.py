"""How a retrieval delivers a source's chunks, by the organisation's DLP action (README, "DLP").

Whoever may search a space receives its sources' chunks (spec: ``drop`` and ``block_source``
sources "are searchable through full-text only"):

- ``allow``: as stored;
- ``redact``, ``drop``, ``block_source``: redacted with the organisation's rules (``drop`` and
  ``block_source`` sources are also never embedded, so only the full-text search finds them).

A classification the policy withholds (``DlpPolicy.withheld``) reaches no one; its sources are left
out before the search (no per-level slot, no budget, nothing to learn from scores) and the answer
warns that the searched spaces hold withheld sources.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from context_ledger.dlp.gate import DlpScanFailedError, redactor_for
from context_ledger.dlp.policy import DlpAction, DlpPolicy
from context_ledger.dlp.redaction import ScanError
from context_ledger.log import logger
from context_ledger.sources.chunking.tokens import count_tokens


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
