"""Base64 that decodes to text: where a secret is carried encoded (Kubernetes Secrets, basic-auth
strings, ``echo ... | base64`` in scripts and CI logs).

The redactor decodes each candidate and rescans the decoded text; a finding there redacts the
whole encoded run. Binary payloads (images, archives, random keys) do not decode to text and are
left to the other detectors, so this costs one C-level decode per candidate and nothing more.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator

from context_ledger.dlp.detectors.runs import base64_runs

_DIGIT = re.compile(r"\d")
#: Decoded text must be this printable (tabs and line breaks count) to be rescanned.
_PRINTABLE_SHARE = 0.95


def decoded_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, decoded)`` for every base64 run of ``text`` that decodes to text."""
    for start, end in base64_runs(text):
        run = text[start:end]
        # Base64 of 12+ bytes of text nearly always mixes cases and digits; identifiers do not.
        if run.islower() or run.isupper() or not _DIGIT.search(run):
            continue
        decoded = decode(run)
        if decoded is not None:
            yield start, end, decoded


def decode(run: str) -> str | None:
    """The text ``run`` encodes, or None when it is not base64 of (almost all printable) text."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return None
    urlsafe = "-" in body or "_" in body
    if urlsafe and ("+" in body or "/" in body):
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        if urlsafe:
            raw = base64.urlsafe_b64decode(padded)
        else:
            raw = base64.b64decode(padded, validate=True)
        decoded = raw.decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if decoded.isprintable():
        return decoded
    printable = sum(c.isprintable() or c in "\t\r\n" for c in decoded)
    return decoded if printable >= _PRINTABLE_SHARE * len(decoded) else None
