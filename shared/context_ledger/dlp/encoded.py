"""Base64 that decodes to text: where a secret is carried encoded (Kubernetes Secrets, basic-auth
strings, ``echo ... | base64`` in scripts and CI logs).

The redactor decodes each candidate and rescans the decoded text; a finding there redacts the
whole encoded run. Binary payloads (images, archives, random keys) do not decode to text and are
left to the other detectors, so this costs one C-level decode per candidate and nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from context_ledger.dlp.detectors.runs import base64_runs, decode

_DIGIT = re.compile(r"\d")
_TEXT_GROUP_STARTS = frozenset("CIJKLMNOPQRSTUVWXYZabcdef")


def decoded_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, decoded)`` for every base64 run of ``text`` that decodes to text."""
    for start, end in base64_runs(text):
        run = text[start:end]
        # Base64 of 12+ bytes of text nearly always mixes cases and digits; identifiers do not.
        # Each 4-character group encodes 3 bytes, the first of which, for ASCII text (a printable
        # character, tab or line break), starts the group with one of _TEXT_GROUP_STARTS.
        if run.islower() or run.isupper() or not _DIGIT.search(run):
            continue
        if not set(run[0::4]) <= _TEXT_GROUP_STARTS:
            continue
        decoded = decode(run)
        if decoded is not None:
            yield start, end, decoded
