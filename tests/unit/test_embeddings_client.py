"""The embeddings client's pure parts: endpoint, answer checks, backoff, settings.

The wire conversation itself is tested against the stand-in server (tests/integration).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from context_ledger.embeddings.client import (
    BACKOFF_CAP_SECONDS,
    RETRY_AFTER_CAP_SECONDS,
    EmbeddingsClient,
    EmbeddingsUnavailableError,
    backoff_seconds,
    client_from_settings,
    endpoint_url,
    parse_embeddings,
    retry_after_seconds,
)
from context_ledger.settings import SettingsError, load_settings


def _answer(vectors: list[list[float]], order: list[int] | None = None) -> dict:
    order = order if order is not None else list(range(len(vectors)))
    return {"data": [{"index": i, "embedding": vectors[i]} for i in order]}


@pytest.mark.parametrize(
    ("configured", "endpoint"),
    [
        ("http://host:8080/v1", "http://host:8080/v1/embeddings"),
        ("http://host:8080/v1/", "http://host:8080/v1/embeddings"),
        ("https://gw.example.com/openai/embeddings", "https://gw.example.com/openai/embeddings"),
    ],
)
def test_a_base_url_gets_embeddings_appended_and_a_full_endpoint_is_kept(
    configured: str, endpoint: str
) -> None:
    assert endpoint_url(configured) == endpoint


def test_vectors_are_put_back_in_input_order_by_index() -> None:
    body = _answer([[1.0, 0.0], [0.0, 1.0], [1, 1]], order=[2, 0, 1])

    assert parse_embeddings(body, count=3, dimensions=2) == [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"object": "list"}, "without a data list"),
        (_answer([[1.0, 0.0]]), "1 embeddings for 2 inputs"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}, "index"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 2, "embedding": [1.0]}]}, "index"),
        ({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": "AAA="}]}, "empty"),
        (_answer([[1.0, float("nan")], [1.0, 0.0]]), "non-finite"),
        (_answer([[1.0, True], [1.0, 0.0]]), "non-number"),
    ],
)
def test_an_answer_that_does_not_match_the_request_is_refused(body: dict, problem: str) -> None:
    with pytest.raises(EmbeddingsUnavailableError, match=problem):
        parse_embeddings(body, count=2, dimensions=None)


def test_an_answer_of_another_dimension_than_configured_is_refused() -> None:
    with pytest.raises(EmbeddingsUnavailableError, match="3 dimensions, expected 2"):
        parse_embeddings(_answer([[1.0, 0.0, 0.0]]), count=1, dimensions=2)


def test_backoff_grows_exponentially_within_a_cap() -> None:
    for attempt, step in [(1, 0.5), (2, 1.0), (3, 2.0), (10, BACKOFF_CAP_SECONDS)]:
        assert step / 2 <= backoff_seconds(attempt) <= step


def test_retry_after_in_seconds_or_as_a_date_is_honoured_up_to_a_cap() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    in_three = (now + timedelta(seconds=3)).strftime("%a, %d %b %Y %H:%M:%S GMT")

    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(in_three, now=now) == pytest.approx(3.0)
    assert retry_after_seconds("3600") == RETRY_AFTER_CAP_SECONDS
    assert retry_after_seconds("-5") == 0.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("soon") is None


def test_no_endpoint_configured_means_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KEYSTONE_CONTEXT_EMBEDDINGS_URL", raising=False)

    assert client_from_settings(load_settings()) is None


def test_a_file_url_is_no_embeddings_endpoint() -> None:
    with pytest.raises(SettingsError, match="KEYSTONE_CONTEXT_EMBEDDINGS_URL"):
        load_settings(
            KEYSTONE_CONTEXT_EMBEDDINGS_URL="file:///tmp/embeddings",
            KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="m",
        )


def test_the_client_takes_model_and_dimensions_from_settings() -> None:
    settings = load_settings(
        KEYSTONE_CONTEXT_EMBEDDINGS_URL="http://127.0.0.1:8089/v1",
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="text-embedding-3-small",
        KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS="256",
    )

    client = client_from_settings(settings)

    assert client is not None
    assert (client.model, client.dimensions) == ("text-embedding-3-small", 256)


def test_the_process_client_follows_the_settings_and_is_reused_while_they_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from context_ledger.embeddings.client import get_embeddings_client
    from context_ledger.settings import get_settings

    def configure(url: str | None) -> EmbeddingsClient | None:
        if url is None:
            monkeypatch.delenv("KEYSTONE_CONTEXT_EMBEDDINGS_URL", raising=False)
            monkeypatch.delenv("KEYSTONE_CONTEXT_EMBEDDINGS_MODEL", raising=False)
        else:
            monkeypatch.setenv("KEYSTONE_CONTEXT_EMBEDDINGS_URL", url)
            monkeypatch.setenv("KEYSTONE_CONTEXT_EMBEDDINGS_MODEL", "m")
        get_settings.cache_clear()
        return get_embeddings_client()

    try:
        assert configure(None) is None
        first = configure("http://127.0.0.1:8089/v1")
        assert first is not None
        assert get_embeddings_client() is first
        assert configure("http://127.0.0.1:8090/v1") is not first
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
