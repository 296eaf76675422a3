"""Runs of the base64/base64url alphabet: what the entropy detector and the base64 decoder read.

Both want every run of 16+ such characters (padding included) that stands alone. One scan,
memoised for the last few texts, serves both: the scan costs about as much as the rest of the
entropy detector, and the redactor asks for it twice per text.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re

MIN_RUN = 16
# The start is checked after the first character (not before it), so the engine skips to
# candidates; possessive, so a run followed by a third "=" fails at once.
_RUN = re.compile(
    r"[A-Za-z0-9+/_\-](?<![A-Za-z0-9+/_\-].)[A-Za-z0-9+/_\-]{15,}+={0,2}(?![A-Za-z0-9+/_=\-])"
)


@functools.lru_cache(maxsize=8)
def base64_runs(text: str) -> tuple[tuple[int, int], ...]:
    """``(start, end)`` of every standalone run of 16+ base64/base64url characters."""
    return tuple(match.span() for match in _RUN.finditer(text))


#: Decoded text must be this printable (tabs and line breaks count) to count as text.
_PRINTABLE_SHARE = 0.95


def decode(run: str) -> str | None:
    """The text ``run`` encodes, or None when it is not base64 of (almost all printable) text.

    Base64 of text is not random, whatever its entropy: the entropy detector leaves it to the
    redactor, which rescans what it says (``dlp.encoded``).
    """
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
