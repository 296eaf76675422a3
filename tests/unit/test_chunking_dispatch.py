"""Which chunker a document gets, language detection and the limits' defaults and bounds."""

from __future__ import annotations

import pytest

from context_ledger.sources.chunking import (
    CODE_LANGUAGES,
    ChunkingConfig,
    chunk_document,
    detect_language,
)
from context_ledger.sources.model import Document, SourceKind

GO = "package refunds\n\n// Authorise approves.\nfunc Authorise() error {\n\treturn nil\n}\n"
MARKDOWN = "# Refunds\n\nA refund returns money.\n"


@pytest.mark.parametrize(
    ("path", "language"),
    [
        ("internal/refunds/refunds.go", "go"),
        ("internal/refunds/refunds_test.go", "go"),
        ("ledger.py", "python"),
        ("typing/ledger.pyi", "python"),
        ("web/src/checkout.ts", "typescript"),
        ("web/src/checkout.mts", "typescript"),
        ("web/src/checkout.cts", "typescript"),
        ("web/src/RefundButton.tsx", "tsx"),
        ("web/src/legacy.js", "javascript"),
        ("Main.java", "java"),
        ("src/lib.rs", "rust"),
        ("db/schema.sql", "sql"),
        ("deploy/values.yaml", "yaml"),
        ("package.json", "json"),
        ("scripts/release.sh", "shell"),
        ("docs/README.md", "markdown"),
        ("Dockerfile", "dockerfile"),
        ("C:\\repo\\MAIN.GO", "go"),
        ("LICENSE", None),
        ("notes.unknown", None),
    ],
)
def test_language_is_detected_from_the_file_name(path: str, language: str | None) -> None:
    assert detect_language(path) == language


def test_code_languages_are_the_ones_with_a_grammar() -> None:
    assert frozenset({"go", "python", "typescript", "tsx"}) == CODE_LANGUAGES


def test_defaults_are_400_prose_tokens_with_40_overlap_and_800_code_tokens() -> None:
    assert ChunkingConfig() == ChunkingConfig(
        prose_max_tokens=400, prose_overlap_tokens=40, code_max_tokens=800
    )


@pytest.mark.parametrize("kind", list(SourceKind))
def test_code_files_get_code_chunking_in_every_kind_of_source(kind: SourceKind) -> None:
    chunks = chunk_document(Document("refunds.go", GO), kind=kind)
    assert [chunk.symbol for chunk in chunks] == [None, "Authorise"]


def test_document_language_wins_over_the_extension() -> None:
    chunks = chunk_document(Document("snippet", GO, language="Golang"), kind=SourceKind.CUSTOM)
    assert [chunk.symbol for chunk in chunks] == [None, "Authorise"]
    assert {chunk.language for chunk in chunks} == {"go"}


def test_markdown_in_a_codebase_is_chunked_as_prose() -> None:
    chunks = chunk_document(Document("docs/refunds.md", MARKDOWN), kind=SourceKind.CODEBASE)
    assert [chunk.metadata["headings"] for chunk in chunks] == [["Refunds"]]


@pytest.mark.parametrize("path", ["CMakeLists.txt", "LICENSE", "config/app.cfg"])
def test_other_text_in_a_codebase_is_chunked_by_lines(path: str) -> None:
    text = "# not a heading in a codebase\nset(REFUNDS ON)\n"
    chunks = chunk_document(Document(path, text), kind=SourceKind.CODEBASE)
    assert len(chunks) == 1
    assert "headings" not in chunks[0].metadata
    assert chunks[0].content == text.rstrip("\n")


@pytest.mark.parametrize("path", ["call-2024-05-01", "minutes.txt", "ticket-123"])
def test_unknown_and_plain_text_outside_a_codebase_is_prose(path: str) -> None:
    chunks = chunk_document(Document(path, MARKDOWN), kind=SourceKind.CONVERSATIONS)
    assert [chunk.metadata["headings"] for chunk in chunks] == [["Refunds"]]


def test_data_files_outside_a_codebase_are_chunked_by_lines() -> None:
    text = "refunds:\n  window_days: 180\n"
    chunks = chunk_document(Document("policy.yaml", text), kind=SourceKind.REGULATORY)
    assert [(chunk.language, chunk.metadata) for chunk in chunks] == [("yaml", {})]


@pytest.mark.parametrize("kind", list(SourceKind))
def test_blank_documents_have_no_chunks(kind: SourceKind) -> None:
    assert chunk_document(Document("empty.go", "\n \n"), kind=kind) == []
    assert chunk_document(Document("empty.md", ""), kind=kind) == []


def test_kind_may_be_given_by_its_wire_name() -> None:
    chunks = chunk_document(Document("refunds.go", GO), kind="codebase")  # type: ignore[arg-type]
    assert [chunk.symbol for chunk in chunks] == [None, "Authorise"]


@pytest.mark.parametrize("max_tokens", [0, 8, 15])
def test_limit_below_sixteen_tokens_is_refused(max_tokens: int) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        chunk_document(Document("a.md", MARKDOWN), kind=SourceKind.DOCS, max_tokens=max_tokens)


@pytest.mark.parametrize("overlap_tokens", [-1, 100, 150])
def test_overlap_not_below_the_limit_is_refused(overlap_tokens: int) -> None:
    with pytest.raises(ValueError, match="overlap_tokens"):
        chunk_document(
            Document("a.md", MARKDOWN),
            kind=SourceKind.DOCS,
            max_tokens=100,
            overlap_tokens=overlap_tokens,
        )
