"""What the detectors read: the text with its disguises taken off, and the way back to it.

Detectors match ASCII shapes (``AKIA`` and 16 capitals or digits, ``password=``...). A secret is
still a secret to a reader when it is disguised, so before detection a text is *folded*:

- compatibility forms become what they stand for (NFKC: fullwidth ``AKIA`` (U+FF21...), ligatures,
  superscript digits, non-breaking spaces);
- characters that render as nothing are removed: format characters (Unicode category Cf: zero-
  width space and joiners, soft hyphen, BOM, bidirectional controls), variation selectors,
  Hangul fillers, and combining marks (``A`` + U+0301 reads as ``Á`` but hides ``A``);
- letters that look like Latin letters are Latin letters (Cyrillic A U+0410, Greek O U+039F), and
  decimal digits of any script are ASCII digits.

A second view *joins* what a writer split: a token broken over two lines, a ``\\``-continuation,
adjacent quoted strings (``"AKIAIOSF" + "ODNN7EXAMPLE"``). Only the joined places are rescanned
(``join_windows``), not the whole text, and only a finding that crosses a join is taken from them.

Each view keeps an ``OffsetMap`` to the text it came from, so a finding in the view becomes a span
of the original text: everything outside a redaction stays as it was written, and a redaction
covers every original character of the finding, hidden ones included.

Plain ASCII text, the usual case, is its own fold: no copy, no map (``fold`` returns at once).
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

# Look-alikes NFKC leaves alone: Cyrillic and Greek letters drawn like a Latin letter or digit
# (from the Unicode confusables list, those that pass for Latin in a monospaced font), by name.
_LOOK_ALIKES = {
    "CYRILLIC CAPITAL LETTER": {
        "A": "A", "VE": "B", "IE": "E", "KA": "K", "EM": "M", "EN": "H", "O": "O", "ER": "P",
        "ES": "C", "TE": "T", "U": "Y", "HA": "X", "DZE": "S", "BYELORUSSIAN-UKRAINIAN I": "I",
        "JE": "J", "ZE": "3", "SHHA": "h",
    },
    "CYRILLIC SMALL LETTER": {
        "A": "a", "IE": "e", "O": "o", "ER": "p", "ES": "c", "U": "y", "HA": "x", "DZE": "s",
        "BYELORUSSIAN-UKRAINIAN I": "i", "JE": "j", "SHHA": "h", "KOMI DE": "d", "QA": "q",
        "WE": "w", "PALOCHKA": "l",
    },
    "CYRILLIC LETTER": {"PALOCHKA": "I"},
    "GREEK CAPITAL LETTER": {
        "ALPHA": "A", "BETA": "B", "EPSILON": "E", "ZETA": "Z", "ETA": "H", "IOTA": "I",
        "KAPPA": "K", "MU": "M", "NU": "N", "OMICRON": "O", "RHO": "P", "TAU": "T", "UPSILON": "Y",
        "CHI": "X",
    },
    "GREEK SMALL LETTER": {
        "ALPHA": "a", "IOTA": "i", "KAPPA": "k", "NU": "v", "OMICRON": "o", "RHO": "p",
        "UPSILON": "u",
    },
}  # fmt: skip
_CONFUSABLES = {
    unicodedata.lookup(f"{script} {name}"): latin
    for script, letters in _LOOK_ALIKES.items()
    for name, latin in letters.items()
}
# Render as nothing besides category Cf: combining grapheme joiner, Hangul fillers, variation
# selectors (category Mn, dropped with the other marks below).
_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@functools.lru_cache(maxsize=8192)
def fold_char(char: str) -> str:
    """What one non-ASCII character reads as to a detector (itself when nothing applies)."""
    if char in _INVISIBLE or unicodedata.category(char) in ("Cf", "Mn", "Me"):
        return ""
    if char in _CONFUSABLES:
        return _CONFUSABLES[char]
    if unicodedata.category(char) == "Nd":
        return str(unicodedata.decimal(char))
    compatible = unicodedata.normalize("NFKC", char)
    if compatible.isascii():
        return compatible
    # Accented Latin letters read as their base letter; other scripts stay as written.
    bare = "".join(
        c for c in unicodedata.normalize("NFKD", compatible) if unicodedata.category(c) != "Mn"
    )
    return bare if bare.isascii() else compatible


@dataclass(frozen=True)
class OffsetMap:
    """Spans of a view back to spans of its source.

    The view is a sequence of pieces: ``copies`` are stretches copied unchanged (view offset
    ``p`` is source offset ``p + shift``), the others stand for one stretch of the source each
    (a replaced character, a removed join), all of which a span touching them covers.
    """

    view_starts: tuple[int, ...]
    source_starts: tuple[int, ...]
    source_ends: tuple[int, ...]
    copies: tuple[bool, ...]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The source span of the view's ``[start, end)`` (``end > start``)."""
        first = bisect.bisect_right(self.view_starts, start) - 1
        last = bisect.bisect_right(self.view_starts, end - 1) - 1
        if self.copies[first]:
            source_start = self.source_starts[first] + start - self.view_starts[first]
        else:
            source_start = self.source_starts[first]
        if self.copies[last]:
            source_end = self.source_starts[last] + end - self.view_starts[last]
        else:
            source_end = self.source_ends[last]
        return source_start, source_end


class _Builder:
    """Assembles a view piece by piece, with its ``OffsetMap``."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.view_starts: list[int] = []
        self.source_starts: list[int] = []
        self.source_ends: list[int] = []
        self.copies: list[bool] = []

    def copy(self, text: str, start: int, end: int) -> None:
        if start < end:
            self._piece(text[start:end], start, end, copy=True)

    def replace(self, replacement: str, start: int, end: int) -> None:
        """``text[start:end]`` reads as ``replacement`` (may be empty: removed)."""
        if replacement:
            self._piece(replacement, start, end, copy=False)

    def _piece(self, part: str, start: int, end: int, *, copy: bool) -> None:
        self.parts.append(part)
        self.view_starts.append(self.length)
        self.source_starts.append(start)
        self.source_ends.append(end)
        self.copies.append(copy)
        self.length += len(part)

    def build(self) -> tuple[str, OffsetMap]:
        return "".join(self.parts), OffsetMap(
            tuple(self.view_starts),
            tuple(self.source_starts),
            tuple(self.source_ends),
            tuple(self.copies),
        )


@dataclass(frozen=True)
class Folded:
    """A text as detectors read it; ``offsets`` is None when it is the original itself."""

    text: str
    offsets: OffsetMap | None

    def span(self, start: int, end: int) -> tuple[int, int]:
        return (start, end) if self.offsets is None else self.offsets.span(start, end)


def fold(text: str) -> Folded:
    """``text`` folded (see the module docstring); ASCII text is returned as it is."""
    if text.isascii():
        return Folded(text, None)
    builder = _Builder()
    position = 0
    for match in _NON_ASCII.finditer(text):
        index = match.start()
        char = match.group()
        folded = fold_char(char)
        if folded == char:
            continue
        builder.copy(text, position, index)
        builder.replace(folded, index, index + 1)
        position = index + 1
    if not builder.parts:
        return Folded(text, None)
    builder.copy(text, position, len(text))
    return Folded(*builder.build())


# Where a writer split a token: a line break between token characters (the next line may be
# indented), a backslash-continuation, or the quotes and ``+`` between adjacent string literals.
# Token characters are the base64url alphabet and "." (JWTs, ``SG.`` keys); "=" only as padding
# at a token's end, so ``KEY=value`` on the next line is a statement, not the rest of a token.
_TOKEN_CHAR = r"[A-Za-z0-9+/_.\-]"  # noqa: S105 (a character class)
# Each starts at the break itself, the character before it checked by a lookbehind placed after
# the break: the engine then skips to line breaks and quotes. A leading lookbehind or character
# class, or one alternation of both, is tried at nearly every position (10-25x slower).
_T = r"[A-Za-z0-9+/=_.\-]"
_LINE_JOIN = re.compile(
    rf"\n(?:(?<={_T}\n)|(?<={_T}\r\n)|(?<={_T}\\\n)|(?<={_T}\\\r\n))[ \t]*(?={_TOKEN_CHAR})"
)
# One pattern per quote, each opening with its literal quote (a backreference to either quote
# made the engine try every quote of a text the slow way: 18 ms -> 4 ms on this repository).
_QUOTE_JOINS = tuple(
    re.compile(rf"{q}(?<={_T}{q})[ \t]*\+?[ \t]*(?:\\?\r?\n[ \t]*)?{q}(?={_TOKEN_CHAR})")
    for q in ('"', "'")
)
_SPLIT_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_.-"
_DIGIT = re.compile(r"\d")
_TOKEN_AFTER = re.compile(rf"{_TOKEN_CHAR}*=*")
# A bare line break joins only a continuation that ends its line (closing quotes and brackets
# aside): a wrapped key's rest stands alone, while two lines of a log, CSV or config that merely
# end and start with tokens go on after the second one.
_LINE_REST = re.compile(r"""[ \t"'`,;)\]}>]*(?:\r?\n|\Z)""")
# PEM blocks are wrapped by design and have their own detector: their lines are never joined.
_ARMOUR = re.compile(r"-----BEGIN [A-Z0-9 ]{1,40}-----[\s\S]*?-----END [A-Z0-9 ]{1,40}-----")
#: A join is only worth a rescan when the token it makes is long enough to be a key or a card
#: number and holds a digit (every token-shaped secret does; wrapped prose rarely does).
MIN_JOINED_TOKEN = 13


@dataclass(frozen=True)
class Window:
    """A stretch of the folded text with a split token joined, to be rescanned.

    ``token``: the joined token's span in the window; ``joins``: the offsets in it where a join
    was removed. A finding counts only when it lies within the token and spans a join (the rest
    of the window was scanned as it is, and anything wider would take in a neighbour).
    """

    text: str
    offsets: OffsetMap
    token: tuple[int, int]
    joins: tuple[int, ...]

    def completes(self, start: int, end: int) -> bool:
        if start < self.token[0] or end > self.token[1]:
            return False
        index = bisect.bisect_right(self.joins, start)
        return index < len(self.joins) and self.joins[index] < end


def join_windows(text: str) -> Iterator[Window]:
    """One window per joined token: the line before its first join up to its end (so ``Bearer``
    or ``key=`` before a split token is in it too)."""
    if "\n" not in text and "'" not in text and '"' not in text:
        return
    joins = [(_break_start(text, m.start()), m.end()) for m in _LINE_JOIN.finditer(text)]
    for quote, pattern in zip(('"', "'"), _QUOTE_JOINS, strict=True):
        if quote in text:
            joins.extend(m.span() for m in pattern.finditer(text))
    joins.sort()
    joins = [join for join in joins if _worth_joining(text, join)]
    if joins and "-----BEGIN " in text:
        armoured = [m.span() for m in _ARMOUR.finditer(text)]
        joins = [j for j in joins if not any(s <= j[0] < e for s, e in armoured)]
    index = 0
    while index < len(joins):
        run = [joins[index]]
        while index + 1 < len(joins) and _adjacent(text, run[-1], joins[index + 1]):
            index += 1
            run.append(joins[index])
        index += 1
        yield _window(text, run)


def _break_start(text: str, newline: int) -> int:
    """Where the break ending in the newline at ``newline`` starts (``\\``, ``\r`` before it)."""
    start = newline
    if text.startswith("\r", start - 1):
        start -= 1
    if text.startswith("\\", start - 1):
        start -= 1
    return start


def _worth_joining(text: str, join: tuple[int, int]) -> bool:
    """A long token with a digit; after a bare line break, a continuation alone on its line."""
    end = _token_end(text, join[1])
    bare_break = text[join[0]] == "\n" or text.startswith("\r\n", join[0])
    if bare_break and not _LINE_REST.match(text, end):
        return False
    start = _token_start(text, join[0])
    if join[0] - start + end - join[1] < MIN_JOINED_TOKEN:
        return False
    return bool(_DIGIT.search(text, start, join[0])) or bool(_DIGIT.search(text, join[1], end))


def _token_start(text: str, end: int) -> int:
    before = text[max(0, end - 256) : end]
    return end - len(before) + len(before.rstrip(_SPLIT_ALPHABET))


def _token_end(text: str, start: int) -> int:
    return _TOKEN_AFTER.match(text, start).end()  # type: ignore[union-attr]


def _adjacent(text: str, join: tuple[int, int], following: tuple[int, int]) -> bool:
    """Whether only token characters lie between two joins (one token split several times)."""
    return _token_end(text, join[1]) >= following[0]


def _window(text: str, run: list[tuple[int, int]]) -> Window:
    start = text.rfind("\n", 0, run[0][0]) + 1
    token_start = _token_start(text, run[0][0])
    end = _token_end(text, run[-1][1])
    builder = _Builder()
    builder.copy(text, start, token_start)
    window_token_start = builder.length
    position = token_start
    joins = []
    for join_start, join_end in run:
        builder.copy(text, position, join_start)
        joins.append(builder.length)
        position = join_end
    builder.copy(text, position, end)
    window_text, offsets = builder.build()
    return Window(window_text, offsets, (window_token_start, len(window_text)), tuple(joins))
