"""Cutting documents into chunks: code at declaration boundaries, prose at headings and paragraphs.

``chunk_document`` picks the chunker from the document's language (``Document.language``, else
the file extension) and the source kind:

- Go, Python, TypeScript and TSX files, in a source of any kind: syntax-aware code chunking.
- In a ``codebase`` source, Markdown (and reStructuredText, AsciiDoc) is prose and every other
  file is chunked by lines.
- Elsewhere, other recognised code or data files (``.js``, ``.sql``, ``.yaml``, ...) are chunked
  by lines and everything else is prose.
"""

from __future__ import annotations

from dataclasses import dataclass

from context_ledger.sources.chunking.code import chunk_code
from context_ledger.sources.chunking.languages import (
    CODE_LANGUAGES,
    PROSE_LANGUAGES,
    TEXT_LANGUAGE,
    detect_language,
    normalise_language,
)
from context_ledger.sources.chunking.lines import chunk_lines
from context_ledger.sources.chunking.prose import chunk_prose
from context_ledger.sources.model import Chunk, Document, SourceKind
from context_ledger.text.tokens import count_tokens

# A limit below this could not hold one character (up to 4 byte tokens) with room to spare.
MIN_MAX_TOKENS = 16


@dataclass(frozen=True)
class ChunkingConfig:
    """Token limits per chunker. Overlap applies to prose only: code chunks are whole units."""

    prose_max_tokens: int = 400
    prose_overlap_tokens: int = 40
    code_max_tokens: int = 800


DEFAULT_CONFIG = ChunkingConfig()


def chunk_document(
    doc: Document,
    *,
    kind: SourceKind,
    max_tokens: int | None = None,
    overlap_tokens: int | None = None,
) -> list[Chunk]:
    """The chunks of one document, in order; none when it is blank.

    ``max_tokens`` defaults to 400 for prose and 800 for code; ``overlap_tokens`` (prose only)
    to 40. Raises ValueError for a limit under MIN_MAX_TOKENS or an overlap not below the limit.
    """
    kind = SourceKind(kind)
    language = normalise_language(doc.language) or detect_language(doc.path)
    if not doc.content.strip():
        return []
    if language in CODE_LANGUAGES or not _is_prose(language, kind):
        limit = _checked_limit(max_tokens, DEFAULT_CONFIG.code_max_tokens)
        if language in CODE_LANGUAGES:
            return chunk_code(doc.path, doc.content, language, max_tokens=limit)
        return chunk_lines(doc.path, doc.content, language, max_tokens=limit)
    limit = _checked_limit(max_tokens, DEFAULT_CONFIG.prose_max_tokens)
    overlap = DEFAULT_CONFIG.prose_overlap_tokens if overlap_tokens is None else overlap_tokens
    if not 0 <= overlap < limit:
        raise ValueError(f"overlap_tokens must be at least 0 and below max_tokens ({limit})")
    return chunk_prose(doc.path, doc.content, language, max_tokens=limit, overlap_tokens=overlap)


def _is_prose(language: str | None, kind: SourceKind) -> bool:
    if language in PROSE_LANGUAGES:
        return True
    if kind is SourceKind.CODEBASE:
        return False
    return language is None or language == TEXT_LANGUAGE


def _checked_limit(max_tokens: int | None, default: int) -> int:
    limit = default if max_tokens is None else max_tokens
    if limit < MIN_MAX_TOKENS:
        raise ValueError(f"max_tokens must be at least {MIN_MAX_TOKENS}")
    return limit


__all__ = [
    "CODE_LANGUAGES",
    "DEFAULT_CONFIG",
    "MIN_MAX_TOKENS",
    "ChunkingConfig",
    "chunk_document",
    "count_tokens",
    "detect_language",
]
