"""CSV exports whose header names a credential column: every cell of that column is one.

Password-manager and browser exports, API-key inventories, user dumps: ``url,username,password``
then a row per account. The header gives the column its meaning, as a key does to a value, so a
cell is judged like an assigned value (``assignment``): literal, not a reference or placeholder.
A table runs from its header to the first blank line or row of another width.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator

import re2

from context_ledger.dlp.detectors.assignment import (
    NAME_PATTERN,
    REPORTED_KINDS,
    is_literal,
    key_kind,
)
from context_ledger.dlp.detectors.base import Finding

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
# A line with a cell naming a credential (then checked cell by cell). RE2: linear, where the
# same pattern on Python's engine tries every cell of every line against every name (20 ms a
# file).
_HEADER = re2.compile(
    r"(?im)^(?:[^\n,]*,)*"
    rf"""[ \t]*["']?[A-Za-z_ .\-]*(?:{NAME_PATTERN})["']?[ \t]*(?:,|\r?$)""",
    _OPTIONS,
)
_HEADER_CELL = re.compile(r"""[ \t]*["']?[A-Za-z_][\w .\-]{0,40}["']?[ \t]*""")


def _credential_cell(value: str, kind: str) -> bool:
    """Whether a cell of a credential column holds one: a literal, not a reference or a
    placeholder (``********``, ``${LDAP_PASS}``). A cell is no code, so a word in it naming a
    secret (``nasrootpass``, ``druckerpasswort``) is part of the value, not the name of a
    variable holding it as in ``password=db_pass``: the cell is judged as a quoted value is."""
    return is_literal(value, kind, quoted=True)


def _lines(text: str) -> list[tuple[int, int]]:
    """Each line's span, line breaks excluded (an empty line is an empty span)."""
    spans = []
    start = 0
    for line in text.split("\n"):
        end = start + len(line)
        spans.append((start, end - 1 if line.endswith("\r") else end))
        start = end + 1
    return spans


def cells(text: str, start: int, end: int) -> list[tuple[int, int, bool]]:
    """The cells of one CSV line as ``(start, end, quoted)``; a quoted cell's span is its content
    (doubled quotes inside kept as written)."""
    found = []
    position = start
    while position <= end:
        if position < end and text[position] == '"':
            close = position + 1
            while True:
                close = text.find('"', close, end)
                if close == -1 or not text.startswith('""', close):
                    break
                close += 2
            if close == -1:
                return found
            found.append((position + 1, close, True))
            position = close + 1
            comma = text.find(",", position, end)
            position = end + 1 if comma == -1 else comma + 1
            continue
        comma = text.find(",", position, end)
        cell_end = end if comma == -1 else comma
        found.append((position, cell_end, False))
        position = cell_end + 1
    return found


class CsvColumnDetector:
    """Cells of CSV columns named like a password or secret (module docstring)."""

    kinds = ("password", "secret")
    # A cell naming a credential, between commas or a comma and the line's end.
    gate = rf"""(?im)(?:^|,)[ \t]*["']?[A-Za-z_ .\-]*(?:{NAME_PATTERN})["']?[ \t]*(?:,|\r?$)"""

    def find(self, text: str) -> Iterator[Finding]:
        lines = None
        for header in _HEADER.finditer(text):
            if lines is None:
                lines = _lines(text)
            line_start = text.rfind("\n", 0, header.start()) + 1
            index = bisect.bisect_left(lines, (line_start, -1))
            yield from self._rows(text, lines, index)

    def _rows(self, text: str, lines: list[tuple[int, int]], index: int) -> Iterator[Finding]:
        columns = self._credential_columns(text, *lines[index])
        index += 1
        if columns:
            width = columns.pop(-1)
            while index < len(lines) and lines[index][0] < lines[index][1]:
                row = cells(text, *lines[index])
                if len(row) != width:
                    break
                for column, kind in columns.items():
                    start, end, _ = row[column]
                    if start < end and _credential_cell(text[start:end], kind):
                        yield Finding(start, end, REPORTED_KINDS[kind])
                index += 1

    @staticmethod
    def _credential_columns(text: str, start: int, end: int) -> dict[int, str]:
        """Column index -> kind for a header line naming a credential (width under key -1)."""
        if text.count(",", start, end) < 1:
            return {}
        header = cells(text, start, end)
        if any(not _HEADER_CELL.fullmatch(text, s - q, e + q) for s, e, q in header):
            return {}
        columns: dict[int, str] = {}
        for column, (s, e, _) in enumerate(header):
            kind = key_kind(text[s:e].strip().strip("'\""))
            if kind is not None:
                columns[column] = kind
        if columns:
            columns[-1] = len(header)  # type: ignore[assignment]
        return columns


# A markdown table's cell separator, and the rule under its header (``|---|:--:|``,
# ``--- | ---``, ``|-|-|``): GitHub's tables need neither the outer pipes nor three dashes.
_PIPE = re.compile(r"(?<!\\)\|")
_MARKDOWN_RULE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*\r?")
# Markup around a cell's text: emphasis and code spans.
_CELL_MARKUP = " \t*_`"


def _is_row(text: str, start: int, end: int) -> bool:
    return _PIPE.search(text, start, end) is not None


def markdown_cells(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The cells of one markdown table row, as spans of their text without blanks and markup
    around it (a ``\\|`` is part of its cell; the pipes opening and closing the row are
    optional)."""
    edges = [start - 1, *(pipe.start() for pipe in _PIPE.finditer(text, start, end)), end]
    pieces = list(itertools.pairwise(edges))
    row = text[start:end].strip()
    if row.startswith("|"):
        pieces = pieces[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        pieces = pieces[:-1]
    found = []
    for left, right in pieces:
        cell = text[left + 1 : right]
        lead = len(cell) - len(cell.lstrip(_CELL_MARKUP))
        core = cell.strip(_CELL_MARKUP)
        found.append((left + 1 + lead, left + 1 + lead + len(core)))
    return found


class MarkdownTableDetector:
    """Cells of markdown table columns named like a password or secret: a header row naming one,
    the rule under it, then every row until a line that is not one (a credentials table in a
    runbook or a wiki page, ``| host | user | password |``, ``host | user | password``). A cell
    is judged like an assigned value: literal, not a reference or placeholder (``********``,
    ``(in the vault)``)."""

    kinds = ("password", "secret")
    # The rule under a header: a cheap mark of a table (a gate naming the credential cell as
    # well made the gate set twice as slow on every text).
    gate = r"(?m)^[ \t]*\|?[ \t]*:?-+:?[ \t]*\|"

    def find(self, text: str) -> Iterator[Finding]:
        lines = _lines(text)
        for index in range(len(lines) - 2):
            header, rule = lines[index], lines[index + 1]
            # Pipes in both (``---`` alone under a line makes it a heading).
            if not (
                _MARKDOWN_RULE.fullmatch(text, *rule)
                and _is_row(text, *rule)
                and _is_row(text, *header)
            ):
                continue
            kinds = [key_kind(text[s:e]) for s, e in markdown_cells(text, *header)]
            if not any(kind in ("password", "secret") for kind in kinds):
                continue
            for row in lines[index + 2 :]:
                if not _is_row(text, *row):
                    break
                for (start, end), kind in zip(markdown_cells(text, *row), kinds, strict=False):
                    credential = kind in ("password", "secret") and start < end
                    if credential and _credential_cell(text[start:end], kind):
                        yield Finding(start, end, REPORTED_KINDS[kind])
