"""Line geometry of a text, and the line-based packer the code chunkers build on.

Rows are 0-based here; chunks carry 1-based lines. Only ``\\n`` ends a line (a ``\\r`` before it
belongs to the terminator), as in editors and tree-sitter, so line numbers agree with both.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

from context_ledger.sources.model import Chunk
from context_ledger.text.tokens import count_tokens, split_at_token_boundaries

_NEWLINE = re.compile(r"\n")
# Estimated cost of the line break(s) between two packed units; the exact count is checked.
_SEPARATOR_TOKENS = 1


class Lines:
    """A text with the offsets of its lines; a final newline does not start another line."""

    def __init__(self, text: str) -> None:
        self.text = text
        breaks = [match.start() for match in _NEWLINE.finditer(text)]
        starts = [0, *(position + 1 for position in breaks)]
        ends = [*breaks, len(text)]
        if not text or text.endswith("\n"):
            starts.pop()
            ends.pop()
        self.starts = starts
        self.ends = [
            end - 1 if end > start and text[end - 1] == "\r" else end
            for start, end in zip(starts, ends, strict=True)
        ]

    def __len__(self) -> int:
        return len(self.starts)

    def slice(self, first_row: int, last_row: int) -> str:
        """Text of rows ``first_row..last_row`` (inclusive), without the last line's terminator."""
        return self.text[self.starts[first_row] : self.ends[last_row]]

    def is_blank(self, row: int) -> bool:
        return not self.text[self.starts[row] : self.ends[row]].strip()

    def row_of(self, offset: int) -> int:
        """Row holding the character at ``offset``."""
        return bisect_right(self.starts, offset) - 1

    def trim(self, first_row: int, last_row: int) -> tuple[int, int]:
        """The rows with blank rows at both ends removed; first > last when all are blank."""
        while first_row <= last_row and self.is_blank(first_row):
            first_row += 1
        while last_row >= first_row and self.is_blank(last_row):
            last_row -= 1
        return first_row, last_row


@dataclass(frozen=True)
class Piece:
    """A chunk's worth of rows. ``columns`` is set when one over-long line was cut into pieces."""

    first_row: int
    last_row: int
    content: str
    token_count: int
    columns: tuple[int, int] | None = None


@dataclass(frozen=True)
class _Unit:
    first_row: int
    last_row: int
    token_count: int


def pack_rows(lines: Lines, first_row: int, last_row: int, max_tokens: int) -> list[Piece]:
    """Cut rows into pieces of at most ``max_tokens`` tokens, preferring blank-line boundaries.

    Blank rows at the edges of a piece are left out. Blank-line-separated blocks are packed
    greedily; a block over the limit is packed line by line, and a line over the limit is cut at
    token boundaries into pieces of its own.
    """
    first_row, last_row = lines.trim(first_row, last_row)
    if first_row > last_row:
        return []
    content = lines.slice(first_row, last_row)
    tokens = count_tokens(content)
    if tokens <= max_tokens:
        return [Piece(first_row, last_row, content, tokens)]
    pieces: list[Piece] = []
    units: list[_Unit] = []
    for block_first, block_last in _blocks(lines, first_row, last_row):
        whole = (block_first, block_last) == (first_row, last_row)
        block_tokens = tokens if whole else count_tokens(lines.slice(block_first, block_last))
        if block_tokens <= max_tokens:
            units.append(_Unit(block_first, block_last, block_tokens))
            continue
        for row in range(block_first, block_last + 1):
            line = lines.slice(row, row)
            line_tokens = block_tokens if block_first == block_last else count_tokens(line)
            if line_tokens <= max_tokens:
                units.append(_Unit(row, row, line_tokens))
                continue
            pieces.extend(_pack(lines, units, max_tokens))
            units = []
            pieces.extend(_cut_line(row, line, max_tokens))
    pieces.extend(_pack(lines, units, max_tokens))
    return pieces


def chunk_lines(path: str, text: str, language: str | None, *, max_tokens: int) -> list[Chunk]:
    """Chunks of a file no syntax-aware chunker handles: blank-line blocks packed to the limit."""
    lines = Lines(text)
    return [
        build_chunk(path=path, piece=piece, language=language, symbol=None, code=True)
        for piece in pack_rows(lines, 0, len(lines) - 1, max_tokens)
    ]


def build_chunk(
    *,
    path: str,
    piece: Piece,
    language: str | None,
    symbol: str | None,
    code: bool,
    metadata: dict[str, Any] | None = None,
) -> Chunk:
    """The stored form of a piece: its hash computed here.

    A piece of a line cut at token boundaries records ``metadata["columns"]``: its start and
    end (exclusive) as character offsets in that line.
    """
    extra = dict(metadata or {})
    if piece.columns is not None:
        extra["columns"] = list(piece.columns)
    return Chunk(
        path=path,
        content=piece.content,
        content_sha256=hashlib.sha256(piece.content.encode()).digest(),
        token_count=piece.token_count,
        code=code,
        language=language,
        symbol=symbol,
        start_line=piece.first_row + 1,
        end_line=piece.last_row + 1,
        metadata=extra,
    )


def _blocks(lines: Lines, first_row: int, last_row: int) -> list[tuple[int, int]]:
    blocks: list[tuple[int, int]] = []
    start: int | None = None
    for row in range(first_row, last_row + 1):
        if lines.is_blank(row):
            if start is not None:
                blocks.append((start, row - 1))
                start = None
        elif start is None:
            start = row
    if start is not None:
        blocks.append((start, last_row))
    return blocks


def _pack(lines: Lines, units: list[_Unit], max_tokens: int) -> list[Piece]:
    """Greedy packing of consecutive units, each within the limit, into pieces within it."""
    pieces: list[Piece] = []
    index = 0
    while index < len(units):
        last = index
        estimate = units[index].token_count
        while last + 1 < len(units):
            grown = estimate + _SEPARATOR_TOKENS + units[last + 1].token_count
            if grown > max_tokens:
                break
            estimate = grown
            last += 1
        while True:
            content = lines.slice(units[index].first_row, units[last].last_row)
            tokens = count_tokens(content) if last > index else units[index].token_count
            if tokens <= max_tokens:
                break
            last -= 1
        pieces.append(Piece(units[index].first_row, units[last].last_row, content, tokens))
        index = last + 1
    return pieces


def _cut_line(row: int, line: str, max_tokens: int) -> list[Piece]:
    pieces: list[Piece] = []
    column = 0
    for part in split_at_token_boundaries(line, max_tokens):
        pieces.append(Piece(row, row, part, count_tokens(part), (column, column + len(part))))
        column += len(part)
    return pieces
