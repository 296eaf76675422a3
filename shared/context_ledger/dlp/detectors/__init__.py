"""Built-in DLP detectors, most specific first (the order decides a merged span's kind)."""

from __future__ import annotations

from context_ledger.dlp.detectors.base import Detector, Finding, RegexDetector
from context_ledger.dlp.detectors.entropy import AssignedEntropyDetector, HighEntropyDetector
from context_ledger.dlp.detectors.personal import PERSONAL_DETECTORS
from context_ledger.dlp.detectors.secrets import SECRET_DETECTORS

#: Every built-in detector. High entropy comes last: it is the fallback for secrets no named
#: detector knows, so any named finding overlapping it gives the placeholder its kind.
BUILTIN_DETECTORS: tuple[Detector, ...] = (
    *SECRET_DETECTORS,
    *PERSONAL_DETECTORS,
    HighEntropyDetector(),
    AssignedEntropyDetector(),
)

#: Kinds that are credentials (everything but personal data): what an identifier must never hold.
SECRET_KINDS: frozenset[str] = frozenset(
    kind
    for detector in BUILTIN_DETECTORS
    if detector not in PERSONAL_DETECTORS
    for kind in detector.kinds
)

__all__ = ["BUILTIN_DETECTORS", "SECRET_KINDS", "Detector", "Finding", "RegexDetector"]
