"""One text redacted with the organisation's rules, failing closed: what every text the service
delivers, indexes for full-text search or searches for passes through (the embeddings gate,
``dlp/gate.py``, redacts what it sends the same way).

A scan failure (a detector error or the scan deadline) raises :class:`DlpScanFailedError`: the
caller then delivers nothing, indexes nothing or searches nothing, and the request answers
``503 context.dlp.scan_failed``.
"""

from __future__ import annotations

from typing import Literal

from context_ledger.dlp.detectors import SECRET_KINDS
from context_ledger.dlp.gate import DlpScanFailedError, redactor_for
from context_ledger.dlp.redaction import CustomPattern, ScanError
from context_ledger.log import logger

#: What the text was redacted for, named in the log of a failed scan.
Stage = Literal["delivery", "indexing", "query"]


def redacted(patterns: tuple[CustomPattern, ...], text: str, *, stage: Stage) -> str:
    """``text`` with every finding of the built-in detectors and of ``patterns`` replaced."""
    try:
        return redactor_for(patterns).redact(text).text
    except ScanError as exc:
        # The error's message never holds the text; the log names the failure only.
        logger.error(
            "DLP scan failed; nothing delivered, indexed or searched",
            extra={"stage": stage, "problem": str(exc)},
        )
        raise DlpScanFailedError() from None


#: What the entropy detectors report: a token that only looks random.
RANDOM_KIND = "high_entropy"
#: The credentials a detector knows by their shape or their name.
_KNOWN_KINDS = SECRET_KINDS - {RANDOM_KIND}


def holds_credential(value: str, *, random: bool = True) -> bool:
    """Whether the built-in detectors find a credential in ``value``: for identifiers (an agent
    key), which are stored and delivered as written, so must be refused rather than redacted.
    ``random=False`` counts only credentials of a known kind, not random-looking tokens: for
    identifiers that are random by design (session ids, ULIDs with a prefix)."""
    try:
        counts = redactor_for(()).redact(value).counts
    except ScanError:
        # Failing closed: an identifier that cannot be scanned is not stored.
        return True
    kinds = SECRET_KINDS if random else _KNOWN_KINDS
    return any(kind in kinds for kind in counts)


def echoed(text: str) -> str:
    """``text``, an error message naming what the caller sent (an unknown field's name), as the
    service may echo it back: redacted by the built-in detectors, since a name can be a pasted
    key and error messages travel on into logs and agents' transcripts. If the scan fails the
    message names nothing the caller sent."""
    try:
        return redactor_for(()).redact(text).text
    except ScanError:
        return "the request breaks the API's rules (its field names could not be checked)"
