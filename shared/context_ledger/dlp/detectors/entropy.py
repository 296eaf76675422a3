"""High-entropy strings: random-looking tokens that no named detector knows (keys, passwords).

A candidate is a run of 20+ characters of the base64/base64url alphabet. It is a secret when it
mixes upper case, lower case and digits (random tokens do; words, identifiers, paths and numbers
rarely do all three) and its Shannon entropy per character is near what a random string of that
length over that alphabet has (``_threshold``).

Deliberately not flagged (each measured by ``bench/dlp.py``'s decoys):
- identifiers and paths, which switch character class rarely or have short segments;
- pure hexadecimal (with or without dashes): git SHAs, content digests, UUIDs, colours. They are
  everywhere in code, logs and lock files, and a hex secret almost always sits behind a name
  (``api_key = "..."``), which the ``secret`` detector catches;
- subresource-integrity hashes (``sha512-...``) and ``data:...;base64,`` payloads.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterator

from context_ledger.dlp.detectors.base import Finding

# Possessive: a run too short or followed by a fourth "=" fails at once instead of backtracking.
_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_=\-])[A-Za-z0-9+/_\-]{20,}+={0,2}(?![A-Za-z0-9+/_=\-])")
_DIGIT = re.compile(r"\d")
_RUN = r"[A-Za-z0-9+/_\-]"
_CLASS_RUN = re.compile(r"\d+|[A-Z]+|[^\dA-Z]+")
_HEX = re.compile(r"[0-9a-fA-F\-]+")
_INTEGRITY = re.compile(r"sha(?:1|256|384|512)-")


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s own character distribution."""
    length = len(value)
    return -sum(n / length * math.log2(n / length) for n in Counter(value).values())


def _threshold(length: int) -> float:
    """Entropy a random base62 string of this length exceeds in nearly every draw.

    A short string cannot show its alphabet's full entropy (20 characters carry at most
    log2(20) = 4.3 bits each), so the bar rises with length, up to 4.5 bits from 48 characters.
    """
    if length < 24:
        return 3.7
    if length < 32:
        return 3.9
    if length < 48:
        return 4.2
    return 4.5


def _random_looking(value: str) -> bool:
    """Random strings switch character class (upper, lower, digit) at ~60% of positions;
    identifiers (``MD5OfMessageAttributes``) once per word. Paths (``/api/v1/things``) have short
    segments; a random token's ``/`` (1 in 64 characters) leaves long ones.
    """
    if "/" in value and max(len(part) for part in value.split("/")) < 12:
        return False
    changes = len(_CLASS_RUN.findall(value)) - 1
    return changes >= 0.4 * len(value)


class HighEntropyDetector:
    """Random-looking base64/base64url tokens (see the module docstring)."""

    kinds = ("high_entropy",)
    # A run of the alphabet holding a digit, an upper- and a lower-case letter, in any order.
    gate = "|".join(
        f"{a}{_RUN}*{b}{_RUN}*{c}" for a, b, c in itertools.permutations((r"\d", "[A-Z]", "[a-z]"))
    )

    def find(self, text: str) -> Iterator[Finding]:
        for match in _CANDIDATE.finditer(text):
            value = match.group(0)
            if (
                not value.isupper()
                and not value.islower()
                and _DIGIT.search(value)
                and not _HEX.fullmatch(value)
                and not _INTEGRITY.match(value)
                and not text.endswith("base64,", 0, match.start())
                and _random_looking(value)
                and shannon_entropy(value.rstrip("=")) >= _threshold(len(value))
            ):
                yield Finding(match.start(), match.end(), "high_entropy")
