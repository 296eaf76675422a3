"""Identifier splitting, so full-text search finds ``parseRefund`` when asked for "parse refund".

PostgreSQL's text-search parser keeps ``parseRefund`` as one word (``parserefund``), and a dotted
name such as ``os.path.exists`` or ``self.stream.write`` as one host or file name, so none of their
parts can be found on its own. The text we index for code is therefore the content followed by the
name of the code's language, the lower-cased parts of its compound identifiers (the whole
identifier stays indexed as the parser reads it) and the words of the declaration's name.

Splitting rules (``split_identifiers``):
- ``_``, ``-``, ``$`` and ``.`` separate parts: ``refund_policy``, ``kebab-case``, ``MAX_RETRIES``,
  ``os.path.exists``.
- A lower-to-upper change starts a part: ``parseRefund`` → parse, refund.
- An acronym ends before the capital that starts the next word: ``HTTPServerError`` → http,
  server, error; a plural ``s`` stays with it: ``URLsFor`` → urls, for.
- Digits stay with the letters before them, because ``int64``, ``sha256``, ``base64``, ``v2``
  and ``http2`` are names in their own right and a lone digit is useless as a search term:
  ``getURL2Path`` → get, url2, path. Digits that start a part stand alone: ``x86_64`` → x86, 64.
  A token starting with a digit is a number, not an identifier: ``404``, ``1e5``, ``0x1F``.
- Names in other scripts split at separators only: ``größe_berechnen`` → größe, berechnen.

Word fragments (``without_fragments``): PostgreSQL's parser makes a lexeme of every piece of a
contraction (``I'm`` → m, ``we'd`` → d, ``you'll`` → ll, ``I've`` → ve) and of a run of letters
and dots (``e.g.`` → e.g, ``L.E. Heindel`` → l.e). None of them says what a text is about, yet
each matched whatever else held it: the ``d`` of "I'd like papers on ..." found a matrix ``D``.
Both the indexed text and the query leave them out (docs/retrieval.md has the figures), except
that a run of capitals is an acronym and is indexed as one word (``U.S.A.`` → USA, found by
"USA"); a letter standing alone (vitamin D, the C language, "vitamin K." ending a sentence)
stays a term.
"""

from __future__ import annotations

import re
from functools import lru_cache

from context_ledger.sources.chunking.languages import TEXT_LANGUAGE

# Runs joined by "-" or "." count as one identifier, so kebab-case and dotted names split into
# their words. The possessive quantifiers keep matching linear on long runs of word characters.
_IDENTIFIER = re.compile(r"[\w$]++(?:[-.][\w$]++)*+")
_SEPARATOR = re.compile(r"[_$.-]+")
_PART = re.compile(
    r"[A-Z]{2,}s(?![a-z])"  # plural acronym: URLs
    r"|[A-Z]+(?=[A-Z][a-z])"  # acronym before a word: HTTP|Server
    r"|[A-Z]?[a-z]+[0-9]*"  # word, with a digit suffix: parse, Refund, sha256
    r"|[A-Z]+[0-9]*"  # acronym at the end or before digits: URL2
    r"|[0-9]+"
)


# Each match starts at the apostrophe or dot that marks a fragment, so the scan only stops at
# those (about 7x faster than a pattern starting at the letter: ~12 ns a character): a
# contraction's tail after a letter and an apostrophe; a run of two or more single letters with
# dots ("e.g.", "i.e", "L.E.", "U.S.A."), matched from its first dot, but not a dotted name
# (``x.shape``) nor one letter and a dot, which ends a sentence as often as it is an initial
# ("vitamin K." as well as "J. Smith").
_FRAGMENT = re.compile(
    r"['\u2019](?<=[a-z]['\u2019])(?:[a-z]|ll|re|ve)\b"
    r"|\.(?<=\b[a-z]\.)(?:[a-z]\.)*[a-z]\b\.?(?!\w)",
    re.IGNORECASE,
)


def without_fragments(text: str) -> str:
    """``text`` without contraction tails and single-letter abbreviations (module docstring),
    each replaced by a space; an abbreviation of capitals is an acronym and becomes the word it
    spells (``U.S.A.`` → USA)."""
    pieces: list[str] = []
    end = 0
    for match in _FRAGMENT.finditer(text):
        start, kept = match.start(), " "
        if text[start] == ".":  # a run of letters and dots, from its first letter
            start -= 1
            letters = text[start : match.end()].replace(".", "")
            kept = letters if letters.isupper() else " "
        pieces += (text[end:start], kept)
        end = match.end()
    if not pieces:
        return text
    pieces.append(text[end:])
    return "".join(pieces)


def split_identifiers(text: str) -> list[str]:
    """Lower-cased parts of every identifier in ``text``, in order, duplicates kept.

    A plain word is its own single part: ``split_identifiers("return parseRefund")`` is
    ``["return", "parse", "refund"]``.
    """
    parts: list[str] = []
    for identifier in _IDENTIFIER.findall(text):
        parts.extend(_split(identifier))
    return parts


def search_text(
    content: str, *, code: bool, language: str | None = None, symbol: str | None = None
) -> str:
    """The text full-text search indexes for a chunk.

    Prose is indexed as it is, less its word fragments (:func:`without_fragments`). Code gets a
    line naming its ``language`` (from the path: ``python``, ``go``), as every chunk of a Python
    file is about Python whether or not it says so: a query naming the language ("python read
    csv") then prefers chunks in that language, and in a source of one language the word matches
    every chunk, so it weighs next to nothing instead of favouring the few chunks whose comments
    spell it (``language`` None, or plain ``text``, adds no line). Then a line lists the parts of
    its compound identifiers, each once, leaving out parts that already occur as a word of their
    own. A chunk of a declaration ends with the words of its ``symbol`` (``is_readable`` → is
    readable), so they count once more: a function's name says what it does, and a query worded
    like it should rank the function above code that merely uses the same words (a title field,
    in search-engine terms).
    """
    content = without_fragments(content)
    if not code:
        return content
    if language and language != TEXT_LANGUAGE:
        content = f"{content}\n{language}"
    content = _with_identifier_parts(content)
    named = split_identifiers(symbol) if symbol else []
    return f"{content}\n{' '.join(named)}" if named else content


def _with_identifier_parts(content: str) -> str:
    words: set[str] = set()
    extra: dict[str, None] = {}
    for identifier in dict.fromkeys(_IDENTIFIER.findall(content)):
        parts = _split(identifier)
        if not parts:
            continue
        if len(parts) == 1:
            words.add(parts[0])
        else:
            extra.update(dict.fromkeys(parts))
    added = [part for part in extra if part not in words]
    return f"{content}\n{' '.join(added)}" if added else content


@lru_cache(maxsize=65536)
def _split(identifier: str) -> tuple[str, ...]:
    """Parts of one identifier; none for a number (``404``, ``1e5``, ``0x1F``)."""
    if identifier.isalpha() and (identifier.islower() or identifier.isupper()):
        return (identifier.lower(),)
    if identifier[0].isdigit() or not any(char.isalpha() for char in identifier):
        return ()
    if not identifier.isascii():
        # Case rules are for ASCII names; other scripts split at separators only.
        return tuple(part.lower() for part in _SEPARATOR.split(identifier) if part)
    return tuple(part.lower() for part in _PART.findall(identifier))
