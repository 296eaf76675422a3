"""Runs of the base64/base64url alphabet: what the entropy detector and the base64 decoder read.

Both want every run of 16+ such characters (padding included) that stands alone. One scan,
memoised for the last few texts, serves both: the scan costs about as much as the rest of the
entropy detector, and the redactor asks for it twice per text.
"""

from __future__ import annotations

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
