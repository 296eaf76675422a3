"""High-entropy strings: random-looking tokens that no named detector knows (keys, passwords).

Two kinds of candidate:
- anywhere, a run of 20+ characters of the base64/base64url alphabet (after a blank, a quote, an
  ``=`` or a ``:`` alike). It is a secret when it mixes upper case, lower case and digits (random
  tokens do; words, identifiers, paths and numbers rarely do all three) and its Shannon entropy
  per character is near what a random string of that length over that alphabet has
  (``_threshold``);
- any assigned value of 16+ characters, whatever the key (``=``, ``:``, ``--flag=`` or
  ``--flag value``, query parameters), read whole as ``assignment`` reads values, so symbols do
  not cut it into pieces too short to judge. It is a secret when it is random-looking as above,
  or mixes letters, digits and symbols other than separators at the same entropy, or (20+) is
  lower case and digits switching often (base36 keys).

Deliberately not flagged (each measured by ``bench/dlp.py``'s decoys):
- identifiers and paths, which switch character class rarely or have short segments;
- pure hexadecimal (with or without dashes, or a ``0x`` literal): git SHAs, content digests,
  UUIDs, colours, key ids, and names pinned by a digest (``image@sha256:...``). They are
  everywhere in code, logs and lock files, and a hex secret almost always sits behind a name
  (``api_key = "..."``), which the ``secret`` detector catches;
- subresource-integrity hashes (``sha512-...``), ``data:...;base64,`` payloads and base64
  media (PNG, JPEG, GIF, WebP, PDF, SVG, ZIP by their encoded signature);
- references and placeholders (``${DB_PASSWORD}``, ``{{ secrets.X }}``, ``<your-key>``), URLs
  and paths, versions and dates (see ``assignment``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterator

from context_ledger.dlp.detectors.assignment import (
    delimiter,
    is_parameter_list,
    is_reference,
    key_start,
    read_value,
)
from context_ledger.dlp.detectors.base import Finding
from context_ledger.dlp.detectors.runs import base64_runs, decode

# Possessive: a run too short or followed by a fourth "=" fails at once instead of backtracking.
# An "=" before the run is an assignment's, not padding: ``sig=...`` is a candidate.
# An assignment's separator and a 16+ character value with a digit after it: ``k=v``, ``k: v``,
# ``--flag v`` (a URL's scheme is not a key).
_ASSIGNED = re.compile(
    r"""(?:=|:(?!//)|-(?<![\w-]-)-?[A-Za-z][\w-]*[ \t])[ \t]*"""
    r"""(?=['"`]?[^\s'"`]{16})(?=['"`]?[^\s'"`\d]*\d)"""
)
_MIN_RUN = 20
_MIN_ASSIGNED = 16
_MAX_ASSIGNED = 500
_DIGIT = re.compile(r"\d")
_RUN = r"[A-Za-z0-9+/_\-]"
_CLASS_RUN = re.compile(r"\d+|[A-Z]+|[^\dA-Z]+")
_LOWER_WORD = re.compile(r"[a-z]{6}")
_HEX = re.compile(r"[0-9a-fA-F\-]+|0[xX][0-9a-fA-F]+")
# An image (or any artefact) pinned by its digest: a name, a tag and ``@sha256:<hex>``
# (``ghcr.io/acme/app:2.14.3@sha256:9f86...``); the random part is a public digest.
_PINNED = re.compile(r"[\w./:\-]*@sha(?:256|384|512):[0-9a-f]{64,128}")
_INTEGRITY = re.compile(r"sha(?:1|256|384|512)-")
# How base64 of common binary formats starts: PNG, JPEG, GIF, WebP/RIFF, PDF, SVG, ZIP, BMP.
_MEDIA = re.compile(
    r"iVBORw0KGgo|/9j/|R0lGOD|UklGR|JVBERi0|PHN2Zy|PD94bWwg|UEsDB|Qk[0-9A-Za-z]{2}AAAA"
)
# Public key material: an SSH public key's body, an X.509 certificate's (base64 DER starts "MII"
# only inside the block, so the block is found from its armour), a key fingerprint.
_PUBLIC_KEY = re.compile(r"AAAA(?:B3NzaC1|C3NzaC1|E2VjZHNh)")
_PUBLIC_BLOCK = re.compile(
    r"-----BEGIN (?:CERTIFICATE|PUBLIC KEY|RSA PUBLIC KEY|X509 CRL|CERTIFICATE REQUEST)-----"
    r"[\s\S]*?-----END [A-Z0-9 ]+-----|<(?:ds:)?X509Certificate>[^<]*"
)
# Typed object ids (Stripe's ch_, cus_, pi_... then 14+ base62): identifiers in every payment
# log, not credentials (the key prefixes sk_, rk_, pk_ are named detectors).
_OBJECT_ID = re.compile(
    r"(?:ch|cus|pi|pm|sub|in|ii|txn|re|evt|prod|price|acct|ba|card|src|seti|po|tr|py|cs|ipi)"
    r"_[A-Za-z0-9]{14,}"
)
# Keys whose values are digests or public material (``sha256: ...``, ``fingerprint=...``,
# kubeconfig's ``certificate-authority-data``), however random they look.
_PUBLIC_KEY_NAME = re.compile(
    r"(?i)(?:sha\d*|md5|hash|digest|checksum|fingerprint|integrity|etag|crt|cert|certificate"
    r"|pub(?:lic)?[_.\-]?key|ca[_.\-]?data|certificate[_.\-]?data|authority[_.\-]?data)\Z"
)
_VERSION_OR_DATE = re.compile(r"v?\d+(?:[.\-:/]\d+)+\b")
_SEPARATORS = frozenset("+/=_-.:")


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s own character distribution."""
    length = len(value)
    return -sum(n / length * math.log2(n / length) for n in Counter(value).values())


def _threshold(length: int) -> float:
    """Entropy a random base62 string of this length exceeds in nearly every draw.

    A short string cannot show its alphabet's full entropy (20 characters carry at most
    log2(20) = 4.3 bits each), so the bar rises with length, up to 4.5 bits from 48 characters.
    """
    if length < 20:
        return 3.4
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

    A long standard-base64 key (``+`` or ``/`` inside, as in AWS's 40-character secret keys) may
    hold an upper-case run (``...bPxRfiCYEXAMPLEKEY``) that drops it to ~35% switches: it
    passes at 30% when no run of 6+ lower-case letters shows it to be a name or a path
    (``role/AWSServiceRoleForEC2FastLaunch``).
    """
    if "/" in value and max(len(part) for part in value.split("/")) < 12:
        return False
    changes = len(_CLASS_RUN.findall(value)) - 1
    if changes >= 0.4 * len(value):
        return True
    return (
        len(value) >= 32
        and ("+" in value or "/" in value)
        and _LOWER_WORD.search(value) is None
        and changes >= 0.3 * len(value)
    )


def _public_spans(text: str) -> list[tuple[int, int]]:
    """Where certificates and public keys sit: random-looking, and meant to be shared."""
    if "-----BEGIN " not in text and "X509Certificate" not in text:
        return []
    return [match.span() for match in _PUBLIC_BLOCK.finditer(text)]


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


def _random_value(value: str) -> bool:
    """Whether an assigned value of any characters is random-looking (module docstring)."""
    length = len(value)
    if not _MIN_ASSIGNED <= length <= _MAX_ASSIGNED or value.startswith("data:"):
        return False
    # The cheap shape tests first: most assigned values are words, paths and numbers.
    if value.isalpha() or value.isdigit() or not _random_looking(value):
        return False
    if (
        _HEX.fullmatch(value)
        or _PINNED.fullmatch(value)
        or _INTEGRITY.match(value)
        or _MEDIA.match(value)
        or _PUBLIC_KEY.match(value)
        or value.startswith(("SHA256:", "MD5:", "ssh-"))
        or decode(value) is not None
        or _VERSION_OR_DATE.match(value)
        or "://" in value
        or is_reference(value, quoted=True)
        or is_parameter_list(value)
    ):
        return False
    digit = any(c.isdigit() for c in value)
    upper = any(c.isupper() for c in value)
    lower = any(c.islower() for c in value)
    symbol = any(not c.isalnum() and c not in _SEPARATORS for c in value)
    if not digit or not (upper or lower):
        return False
    # Lower case and digits only: base36 keys, but also slugs and ids; want more evidence.
    base36 = not ((upper and lower) or symbol)
    if base36 and (upper or length < 20 or sum(c.isdigit() for c in value) < 0.2 * length):
        return False
    return shannon_entropy(value) >= _threshold(length)


def _assigned_values(text: str) -> Iterator[tuple[int, int]]:
    """Spans of every assigned value of 16+ characters (module docstring)."""
    resume = 0
    for match in _ASSIGNED.finditer(text):
        if match.start() < resume:
            continue
        key_end = match.start()
        if text[key_end] in ":=":
            while key_end > 0 and text[key_end - 1] in " \t\"'":
                key_end -= 1
        start = key_start(text, key_end)
        if _PUBLIC_KEY_NAME.search(text, start, key_end):
            continue
        value = read_value(text, match.end(), delimiter(text, start))
        if value is not None and value.end - value.start >= _MIN_ASSIGNED:
            resume = value.end
            yield value.start, value.end


class HighEntropyDetector:
    """Random-looking base64/base64url runs (see the module docstring)."""

    kinds = ("high_entropy",)
    # A run of the alphabet holding a digit, an upper- and a lower-case letter, in any order.
    gate = "|".join(
        f"{a}{_RUN}*{b}{_RUN}*{c}" for a, b, c in itertools.permutations((r"\d", "[A-Z]", "[a-z]"))
    )

    def find(self, text: str) -> Iterator[Finding]:
        public = _public_spans(text)
        for start, end in base64_runs(text):
            value = text[start:end]
            if (
                len(value) >= _MIN_RUN
                and not _inside(start, public)
                and not _PUBLIC_KEY.match(value)
                and not _OBJECT_ID.fullmatch(value)
                and not _PUBLIC_KEY_NAME.search(text, max(0, start - 24), max(0, start - 1))
                and not value.isupper()
                and not value.islower()
                and _DIGIT.search(value)
                and not _HEX.fullmatch(value)
                and not _INTEGRITY.match(value)
                and not _MEDIA.match(value)
                and not text.endswith("base64,", 0, start)
                and _random_looking(value)
                and shannon_entropy(value.rstrip("=")) >= _threshold(len(value))
                and decode(value) is None
            ):
                yield Finding(start, end, "high_entropy")


class AssignedEntropyDetector:
    """Random-looking assigned values, whatever the key and the characters (module docstring).

    Ungated: assignments are everywhere, so a gate for them would open on nearly every text and
    make the shared RE2 set several times slower.
    """

    kinds = ("high_entropy",)
    gate = None

    def find(self, text: str) -> Iterator[Finding]:
        public = _public_spans(text)
        for start, end in _assigned_values(text):
            if not _inside(start, public) and _random_value(text[start:end]):
                yield Finding(start, end, "high_entropy")
