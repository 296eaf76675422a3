"""Prose chunking: Markdown headings and paragraphs packed into overlapping chunks.

Blocks are headings (ATX and setext), fenced code blocks and blank-line-separated paragraphs.
Consecutive blocks of one section are packed into chunks of at most ``max_tokens``; a heading
starts a new chunk (unless the chunk so far holds only headings, so a title is not a chunk of its
own). When a section continues into the next chunk, that chunk opens with the end of the
previous one (at most ``overlap_tokens``, from a sentence or line start when one fits), so a
passage cut in two can still be found whole. A new section gets no overlap: the text before a
heading belongs to another topic.

A fenced block is never cut unless it alone is over the limit (then at line boundaries); a
paragraph over the limit is cut at sentence and line boundaries, and any piece still over it at
token boundaries. Every chunk is an exact slice of the document, so its lines are the document's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from context_ledger.sources.chunking.lines import Lines, Piece, build_chunk
from context_ledger.sources.model import Chunk
from context_ledger.text.tokens import (
    count_tokens,
    split_at_token_boundaries,
    tail_at_token_boundary,
)

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_FRONT_MATTER_END = frozenset({"---", "..."})
# Where a sentence or a line starts: after .!? (and closing quotes or brackets) plus whitespace,
# or after a line break.
_BOUNDARY = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+|\n\s*")
# Characters per token assumed when looking for an overlap start; only bounds the search.
_OVERLAP_CHARS_PER_TOKEN = 8


@dataclass(frozen=True)
class _Block:
    first_row: int
    last_row: int
    kind: str  # "heading", "fence" or "text"
    level: int = 0
    title: str = ""


@dataclass(frozen=True)
class _Limit:
    """The chunk limit, and the size of token-boundary cuts: smaller, to leave room for overlap."""

    max_tokens: int
    cut_tokens: int


@dataclass(frozen=True)
class _Unit:
    """The smallest range of text packing moves: a block, or a piece of an oversized one."""

    start: int
    end: int
    token_count: int
    headings: tuple[str, ...]  # heading path in effect; a heading's own path includes it
    is_heading: bool
    starts_section: bool


@dataclass(frozen=True)
class _Packed:
    start: int
    end: int
    token_count: int
    headings: tuple[str, ...]


def chunk_prose(
    path: str, text: str, language: str | None, *, max_tokens: int, overlap_tokens: int
) -> list[Chunk]:
    """Chunks of a prose document (see the module docstring); none for blank text."""
    lines = Lines(text)
    limit = _Limit(max_tokens, cut_tokens=max_tokens - overlap_tokens)
    units = _units(lines, _blocks(lines), limit)
    packed = _Packer(text, max_tokens, overlap_tokens).pack(units)
    return [
        build_chunk(
            path=path,
            piece=Piece(
                lines.row_of(chunk.start),
                lines.row_of(chunk.end - 1),
                text[chunk.start : chunk.end],
                chunk.token_count,
            ),
            language=language,
            symbol=None,
            code=False,
            metadata={"headings": list(chunk.headings)},
        )
        for chunk in packed
    ]


def _blocks(lines: Lines) -> list[_Block]:
    """Front matter, headings, fenced blocks and paragraphs, in order (CommonMark's main rules)."""
    blocks: list[_Block] = []
    row = _front_matter_end(lines) + 1
    if row > 0:
        blocks.append(_Block(0, row - 1, "text"))
    paragraph: int | None = None  # first row of the paragraph being read
    while row < len(lines):
        line = lines.slice(row, row)
        fence = _FENCE.match(line)
        atx = None if fence or not line.strip() else _ATX.fullmatch(line)
        setext = _SETEXT.fullmatch(line) if paragraph is not None else None
        if setext is not None and paragraph is not None:
            title = " ".join(lines.slice(r, r).strip() for r in range(paragraph, row))
            level = 1 if setext.group(1).startswith("=") else 2
            blocks.append(_Block(paragraph, row, "heading", level, title))
            paragraph = None
        elif fence or atx or not line.strip():
            if paragraph is not None:
                blocks.append(_Block(paragraph, row - 1, "text"))
                paragraph = None
            if fence:
                end = _fence_end(lines, row, fence.group(1))
                blocks.append(_Block(row, end, "fence"))
                row = end
            elif atx:
                blocks.append(_Block(row, row, "heading", len(atx.group(1)), atx.group(2) or ""))
        elif paragraph is None:
            paragraph = row
        row += 1
    if paragraph is not None:
        blocks.append(_Block(paragraph, len(lines) - 1, "text"))
    return blocks


def _front_matter_end(lines: Lines) -> int:
    """Last row of a YAML front matter block (``---`` ... ``---``), or -1 when there is none."""
    if not len(lines) or lines.slice(0, 0).rstrip() != "---":
        return -1
    for row in range(1, len(lines)):
        if lines.slice(row, row).rstrip() in _FRONT_MATTER_END:
            return row
    return -1


def _fence_end(lines: Lines, opening_row: int, marker: str) -> int:
    """Row of the line closing a fence (same character, at least as long); else the last row."""
    for row in range(opening_row + 1, len(lines)):
        closing = lines.slice(row, row).strip()
        if len(closing) >= len(marker) and closing == marker[0] * len(closing):
            return row
    return len(lines) - 1


def _units(lines: Lines, blocks: list[_Block], limit: _Limit) -> list[_Unit]:
    units: list[_Unit] = []
    path: list[tuple[int, str]] = []
    for block in blocks:
        is_heading = block.kind == "heading"
        if is_heading:
            while path and path[-1][0] >= block.level:
                path.pop()
            path.append((block.level, block.title.strip()))
        headings = tuple(title for _, title in path)
        start, end = lines.starts[block.first_row], lines.ends[block.last_row]
        text = lines.text[start:end]
        tokens = count_tokens(text)
        if tokens <= limit.max_tokens:
            ranges = [(start, end, tokens)]
        elif block.kind == "fence":
            ranges = _split_fence(lines, block, limit)
        else:
            ranges = _split_text(text, start, limit)
        units.extend(
            _Unit(s, e, n, headings, is_heading, is_heading and index == 0)
            for index, (s, e, n) in enumerate(ranges)
        )
    return units


def _split_fence(lines: Lines, block: _Block, limit: _Limit) -> list[tuple[int, int, int]]:
    ranges: list[tuple[int, int, int]] = []
    for row in range(block.first_row, block.last_row + 1):
        if not lines.is_blank(row):
            ranges.extend(_cut(lines.slice(row, row), lines.starts[row], limit))
    return ranges


def _split_text(text: str, offset: int, limit: _Limit) -> list[tuple[int, int, int]]:
    """Sentences and lines of an oversized paragraph, cut further at tokens when needed."""
    ranges: list[tuple[int, int, int]] = []
    position = 0
    for end in [*(match.end() for match in _BOUNDARY.finditer(text)), len(text)]:
        segment = text[position:end]
        stripped = segment.strip()
        if stripped:
            start = position + segment.index(stripped[0])
            ranges.extend(_cut(stripped, offset + start, limit))
        position = end
    return ranges


def _cut(text: str, offset: int, limit: _Limit) -> list[tuple[int, int, int]]:
    """(start, end, tokens) of ``text`` at ``offset``, in token-boundary pieces if needed."""
    tokens = count_tokens(text)
    if tokens <= limit.max_tokens:
        return [(offset, offset + len(text), tokens)]
    ranges: list[tuple[int, int, int]] = []
    for piece in split_at_token_boundaries(text, limit.cut_tokens):
        ranges.append((offset, offset + len(piece), count_tokens(piece)))
        offset += len(piece)
    return ranges


class _Packer:
    """Greedy packing of units into chunks, with overlap carried within a section."""

    def __init__(self, text: str, max_tokens: int, overlap_tokens: int) -> None:
        self.text = text
        self.max_tokens = max_tokens
        self.overlap_tokens = overlap_tokens
        self.chunks: list[_Packed] = []
        self.members: list[_Unit] = []
        self.lead: int | None = None  # start of the overlap carried from the previous chunk
        self.end = 0  # end of the text gathered so far (members, or the carried overlap)
        self.estimate = 0  # token estimate of that text; the exact count is taken on closing

    def pack(self, units: list[_Unit]) -> list[_Packed]:
        index = 0
        while index < len(units) or self.members:
            if index == len(units):
                index -= self._close()
                continue
            unit = units[index]
            if self.members and unit.starts_section and not self._only_headings():
                index -= self._close(carry=False)
                continue
            if self.members or self.lead is not None:
                grown = self.estimate + count_tokens(self.text[self.end : unit.start])
                grown += unit.token_count
                if grown > self.max_tokens:
                    if self.members:
                        index -= self._close(carry=not unit.is_heading)
                    else:
                        self.lead = None
                    continue
                self.estimate = grown
            else:
                self.estimate = unit.token_count
            self.members.append(unit)
            self.end = unit.end
            index += 1
        return self.chunks

    def _only_headings(self) -> bool:
        return all(member.is_heading for member in self.members)

    def _close(self, *, carry: bool = False) -> int:
        """Emit the gathered chunk; return how many units went back because it ran over."""
        returned: list[_Unit] = []
        while True:
            start = self.lead if self.lead is not None else self.members[0].start
            end = self.members[-1].end
            tokens = count_tokens(self.text[start:end])
            if tokens <= self.max_tokens:
                break
            if self.lead is not None:
                self.lead = None
            else:  # more than one member: a lone unit is within the limit by construction
                returned.insert(0, self.members.pop())
        body = next((member for member in self.members if not member.is_heading), None)
        headings = (body or self.members[-1]).headings
        self.chunks.append(_Packed(start, end, tokens, headings))
        if returned:
            carry = not returned[0].is_heading
        self.members = []
        self.lead = _overlap_start(self.text, start, end, self.overlap_tokens) if carry else None
        self.end = end
        self.estimate = count_tokens(self.text[self.lead : end]) if self.lead is not None else 0
        return len(returned)


def _overlap_start(text: str, start: int, end: int, overlap_tokens: int) -> int | None:
    """Where the next chunk starts re-reading ``text[start:end]``, or None for no overlap.

    The earliest sentence or line start whose tail fits in ``overlap_tokens``; when even the
    last sentence is longer, a token-boundary tail moved forward to a word start.
    """
    if overlap_tokens <= 0:
        return None
    window = max(start + 1, end - overlap_tokens * _OVERLAP_CHARS_PER_TOKEN)
    candidates = [match.end() for match in _BOUNDARY.finditer(text, window, end)]
    best: int | None = None
    for position in reversed(candidates):
        if position >= end:
            continue
        if count_tokens(text[position:end]) > overlap_tokens:
            break
        best = position
    if best is not None:
        return best
    tail = tail_at_token_boundary(text[window:end], overlap_tokens)
    position = end - len(tail)
    space = re.search(r"\s+\S", tail)
    if space is not None:
        position += space.end() - 1
    return position if start < position < end else None
