"""Token usage read from provider answers without touching them."""

from __future__ import annotations

import pytest

from context_ledger.model_gateway.usage import StreamUsage, TokenUsage, usage_of_body

USAGE = b'"usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}'


def test_a_plain_answer_carries_its_usage() -> None:
    assert usage_of_body(b'{"id": "x", ' + USAGE + b"}") == TokenUsage(3, 5, 8)


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"usage": null}', b'{"usage": {"prompt_tokens": -1}}', b"{}"],
)
def test_an_answer_without_usable_usage_has_none(body: bytes) -> None:
    assert usage_of_body(body) is None


def test_embeddings_usage_has_no_completion_tokens() -> None:
    body = b'{"usage": {"prompt_tokens": 4, "total_tokens": 4}}'
    assert usage_of_body(body) == TokenUsage(4, None, 4)


def test_a_stream_reports_the_usage_event_even_when_split_across_chunks() -> None:
    stream = (
        b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
        b"data: {" + USAGE + b', "choices": []}\r\n\r\n'
        b": a comment\n\n"
        b"data: [DONE]\n\n"
    )
    usage = StreamUsage()
    for i in range(0, len(stream), 7):
        usage.feed(stream[i : i + 7])

    assert usage.usage == TokenUsage(3, 5, 8)


def test_a_stream_without_a_usage_event_reports_none() -> None:
    usage = StreamUsage()
    usage.feed(b'data: {"choices": []}\n\ndata: {broken\n\ndata: [DONE]\n\n')

    assert usage.usage is None
