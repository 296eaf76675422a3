"""Code chunking at function, method and type boundaries, with tree-sitter.

The file is cut into spans that cover every line: one per declaration (with its leading
comments), a class too big for one chunk as a header span plus one per method, and "glue" spans
(``symbol=None``) for whatever lies between: package clause, imports, top-level variables. Each
span becomes one chunk, or consecutive parts when it is over the token limit. Because spans are
line ranges cut from the whole file, nothing is lost whatever tree-sitter makes of broken code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from context_ledger.sources.chunking.declarations import Declaration, find_declarations
from context_ledger.sources.chunking.languages import parser_for
from context_ledger.sources.chunking.lines import Lines, build_chunk, chunk_lines, pack_rows
from context_ledger.sources.model import Chunk
from context_ledger.text.tokens import count_tokens

_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class _Span:
    first_row: int
    last_row: int
    symbol: str | None


def chunk_code(path: str, text: str, language: str, *, max_tokens: int) -> list[Chunk]:
    """Chunks of a Go, Python, TypeScript or TSX file (see the module docstring)."""
    try:
        tree = parser_for(language).parse(text.encode())
    except ValueError:  # the parser gave up: no tree at all
        return chunk_lines(path, text, language, max_tokens=max_tokens)
    lines = Lines(text)
    declarations = find_declarations(tree.root_node, language)
    chunks: list[Chunk] = []
    for span in _spans(lines, declarations, max_tokens):
        pieces = pack_rows(lines, span.first_row, span.last_row, max_tokens)
        for number, piece in enumerate(pieces, start=1):
            parts = len(pieces) > 1 and span.symbol is not None
            metadata = {"part": number, "parts": len(pieces)} if parts else {}
            chunks.append(
                build_chunk(
                    path=path,
                    piece=piece,
                    language=language,
                    symbol=span.symbol,
                    code=True,
                    metadata=metadata,
                )
            )
    return chunks


def _spans(lines: Lines, declarations: list[Declaration], max_tokens: int) -> list[_Span]:
    spans: list[_Span] = []
    for declaration in declarations:
        if declaration.members and _too_big(lines, declaration, max_tokens):
            spans.extend(_class_spans(lines, declaration))
        else:
            spans.append(_Span(declaration.first_row, declaration.last_row, declaration.symbol))
    return _with_glue(lines, _merged(lines, spans))


def _too_big(lines: Lines, declaration: Declaration, max_tokens: int) -> bool:
    return count_tokens(lines.slice(declaration.first_row, declaration.last_row)) > max_tokens


def _class_spans(lines: Lines, declaration: Declaration) -> list[_Span]:
    """A big class: header (class line, docstring, fields) as ``Class``, methods as ``Class.m``.

    Class-level code between methods is another ``Class`` span, except bare punctuation (a
    closing brace), which joins the method before it.
    """
    spans: list[_Span] = []
    cursor = declaration.first_row
    for member in declaration.members:
        if member.first_row > cursor:
            _add_between(spans, lines, cursor, member.first_row - 1, declaration.symbol)
        spans.append(_Span(member.first_row, member.last_row, member.symbol))
        cursor = max(cursor, member.last_row + 1)
    if cursor <= declaration.last_row:
        _add_between(spans, lines, cursor, declaration.last_row, declaration.symbol)
    return spans


def _with_glue(lines: Lines, spans: list[_Span]) -> list[_Span]:
    """The spans with the rows between them (and around them) as glue spans."""
    result: list[_Span] = []
    cursor = 0
    for span in spans:
        if span.first_row > cursor:
            _add_between(result, lines, cursor, span.first_row - 1, None)
        result.append(span)
        cursor = span.last_row + 1
    if cursor < len(lines):
        _add_between(result, lines, cursor, len(lines) - 1, None)
    return result


def _add_between(
    spans: list[_Span], lines: Lines, first_row: int, last_row: int, symbol: str | None
) -> None:
    """Add rows found between spans; a run without a word character joins the previous span."""
    first_row, last_row = lines.trim(first_row, last_row)
    if first_row > last_row:
        return
    if spans and not _WORD.search(lines.slice(first_row, last_row)):
        spans[-1] = replace(spans[-1], last_row=last_row)
    else:
        spans.append(_Span(first_row, last_row, symbol))


def _merged(lines: Lines, spans: list[_Span]) -> list[_Span]:
    """Spans sharing a row become one, and so do neighbours with the same symbol.

    The first case is two declarations on one line; the second, overloads (TypeScript
    signatures before the implementation, Python ``@overload``) and getter/setter pairs.
    """
    merged: list[_Span] = []
    for span in spans:
        if merged and (
            span.first_row <= merged[-1].last_row
            or (span.symbol == merged[-1].symbol and _only_blank_between(lines, merged[-1], span))
        ):
            merged[-1] = replace(merged[-1], last_row=max(merged[-1].last_row, span.last_row))
        else:
            merged.append(span)
    return merged


def _only_blank_between(lines: Lines, before: _Span, after: _Span) -> bool:
    return lines.trim(before.last_row + 1, after.first_row - 1)[0] >= after.first_row
