"""The stand-in embeddings server speaks OpenAI's protocol, and the client survives its failures.

Everything here runs over real HTTP on loopback: the client is the production client.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Iterator, Sequence

import httpx
import pytest

from context_ledger.embeddings.client import EmbeddingsClient, EmbeddingsUnavailableError
from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider
from context_ledger.embeddings.serving import MiniLMService
from context_ledger.embeddings.wire import Embedded
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings

API_KEY = "sk-test-0123456789"
SECRET_TEXT = "customer card 4111 1111 1111 1111"


@pytest.fixture(scope="module")
def server() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 16, api_key=API_KEY) as running:
        yield running


@pytest.fixture
def stand_in(server: StandInEmbeddingsServer) -> StandInEmbeddingsServer:
    server.reset()
    return server


def _client(
    server: StandInEmbeddingsServer, sleeps: list[float] | None = None, **options
) -> EmbeddingsClient:
    """A client that records its backoff waits in ``sleeps`` instead of sleeping."""
    options.setdefault("api_key", API_KEY)
    sleeps = [] if sleeps is None else sleeps
    return EmbeddingsClient(server.url, "stand-in", sleep=sleeps.append, **options)


def _post(server: StandInEmbeddingsServer, body: object, key: str | None = API_KEY):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(f"{server.url}/embeddings", json=body, headers=headers)


# --- the server's protocol -------------------------------------------------------------------


def test_an_answer_has_openais_exact_shape_with_hashing_vectors(
    stand_in: StandInEmbeddingsServer,
) -> None:
    response = _post(stand_in, {"model": "m", "input": ["refund policy", "two words here"]})

    assert response.status_code == 200
    expected = HashingEmbeddingProvider(16).embed(["refund policy", "two words here"])
    assert response.json() == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": expected[0]},
            {"object": "embedding", "index": 1, "embedding": expected[1]},
        ],
        "model": "m",
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }


def test_dimensions_and_base64_encoding_are_honoured(stand_in: StandInEmbeddingsServer) -> None:
    body = {"model": "m", "input": "refunds", "dimensions": 8, "encoding_format": "base64"}

    encoded = _post(stand_in, body).json()["data"][0]["embedding"]

    decoded = struct.unpack("<8f", base64.b64decode(encoded))
    expected = HashingEmbeddingProvider(8).embed_text("refunds")
    assert decoded == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": ["x"]}, "model"),
        ({"model": "m", "input": []}, "input"),
        ({"model": "m", "input": [""]}, "input"),
        ({"model": "m", "input": [1, 2]}, "input"),
        ({"model": "m", "input": ["x"], "dimensions": 0}, "dimensions"),
        ({"model": "m", "input": ["x"], "encoding_format": "int8"}, "encoding_format"),
    ],
)
def test_bad_input_is_a_400_with_openais_error_body(
    stand_in: StandInEmbeddingsServer, body: dict, param: str
) -> None:
    response = _post(stand_in, body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["param"]) == ("invalid_request_error", param)


@pytest.mark.parametrize("key", [None, "sk-wrong"])
def test_a_missing_or_wrong_key_is_a_401(
    stand_in: StandInEmbeddingsServer, key: str | None
) -> None:
    response = _post(stand_in, {"model": "m", "input": ["x"]}, key=key)

    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_every_request_is_logged_with_body_and_headers(stand_in: StandInEmbeddingsServer) -> None:
    _post(stand_in, {"model": "m", "input": ["logged"]})

    [request] = stand_in.requests
    assert (request.method, request.path) == ("POST", "/v1/embeddings")
    assert request.body == {"model": "m", "input": ["logged"]}
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"


# --- the client against it -------------------------------------------------------------------


def test_the_client_sends_openais_request_and_returns_vectors_in_order(
    stand_in: StandInEmbeddingsServer,
) -> None:
    texts = [f"text number {i}" for i in range(130)]

    vectors = _client(stand_in, dimensions=16).embed(texts)

    assert vectors == HashingEmbeddingProvider(16).embed(texts)
    assert [len(r.body["input"]) for r in stand_in.requests] == [32, 32, 32, 32, 2]
    first = stand_in.requests[0]
    assert first.body == {
        "model": "stand-in",
        "input": texts[:32],
        "encoding_format": "float",
        "dimensions": 16,
    }
    assert first.headers["Authorization"] == f"Bearer {API_KEY}"


def test_inputs_go_in_batches_of_the_configured_size(stand_in: StandInEmbeddingsServer) -> None:
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]

    vectors = _client(stand_in, batch_size=2).embed(texts)

    assert [r.body["input"] for r in stand_in.requests] == [["a", "bb"], ["ccc", "dddd"], ["eeeee"]]
    assert vectors == HashingEmbeddingProvider(16).embed(texts)


class _BatchSizedVectors:
    """A service whose vectors have one dimension more than the batch has texts."""

    def embed(self, texts: Sequence[str], dimensions: int | None) -> Embedded:
        return Embedded([[1.0] * (len(texts) + 1) for _ in texts], len(texts))


def test_batches_answering_different_dimensions_are_refused() -> None:
    with serve_embeddings(service=_BatchSizedVectors()) as server:
        client = EmbeddingsClient(server.url, "m", batch_size=2)

        with pytest.raises(EmbeddingsUnavailableError, match="mixed dimensions"):
            client.embed(["a", "b", "c"])


def test_no_texts_make_no_request(stand_in: StandInEmbeddingsServer) -> None:
    assert _client(stand_in).embed([]) == []
    assert stand_in.requests == []


def _proxies(monkeypatch: pytest.MonkeyPatch, http_proxy: str, no_proxy: str = "") -> None:
    for name in ("http_proxy", "https_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", http_proxy)
    if no_proxy:
        monkeypatch.setenv("NO_PROXY", no_proxy)


def test_a_proxy_the_environment_names_carries_the_requests(
    stand_in: StandInEmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _proxies(monkeypatch, stand_in.url.removesuffix("/v1"))
    client = EmbeddingsClient("http://embeddings.example/v1", "m", api_key=API_KEY, max_attempts=1)

    # The stand-in, asked as a proxy for another host, answers 404 to the absolute URL.
    with pytest.raises(EmbeddingsUnavailableError, match="HTTP 404"):
        client.embed(["x"])
    assert [r.path for r in stand_in.requests] == ["http://embeddings.example/v1/embeddings"]


def test_an_endpoint_no_proxy_names_is_reached_directly(
    stand_in: StandInEmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _proxies(monkeypatch, "http://127.0.0.1:9", no_proxy="127.0.0.1")  # no proxy listens there

    assert len(_client(stand_in).embed(["x"])) == 1
    assert [r.path for r in stand_in.requests] == ["/v1/embeddings"]


def test_without_configured_dimensions_none_are_sent(stand_in: StandInEmbeddingsServer) -> None:
    _client(stand_in).embed(["x"])

    assert "dimensions" not in stand_in.requests[0].body


def test_server_errors_are_retried_with_backoff_until_success(
    stand_in: StandInEmbeddingsServer,
) -> None:
    stand_in.fail_next(503, times=2)
    sleeps: list[float] = []

    assert len(_client(stand_in, sleeps).embed(["x"])) == 1
    assert len(stand_in.requests) == 3
    assert len(sleeps) == 2
    assert 0.25 <= sleeps[0] <= 0.5
    assert 0.5 <= sleeps[1] <= 1.0


def test_a_429_waits_as_long_as_retry_after_says(stand_in: StandInEmbeddingsServer) -> None:
    stand_in.fail_next(429, retry_after="2")
    sleeps: list[float] = []

    _client(stand_in, sleeps).embed(["x"])

    assert sleeps == [2.0]


def test_three_failures_give_up_without_naming_url_key_or_text(
    stand_in: StandInEmbeddingsServer,
) -> None:
    stand_in.fail_next(500, times=3)

    with pytest.raises(EmbeddingsUnavailableError) as caught:
        _client(stand_in).embed([SECRET_TEXT])

    message = str(caught.value)
    assert message == "embeddings endpoint answered HTTP 500 (server_error) after 3 attempts"
    assert len(stand_in.requests) == 3


def test_a_refused_request_is_not_retried(stand_in: StandInEmbeddingsServer) -> None:
    with pytest.raises(EmbeddingsUnavailableError) as caught:
        _client(stand_in, api_key="sk-wrong-key").embed([SECRET_TEXT])

    assert str(caught.value) == "embeddings endpoint answered HTTP 401 (invalid_api_key)"
    assert len(stand_in.requests) == 1


def test_a_slow_endpoint_times_out_and_is_retried(stand_in: StandInEmbeddingsServer) -> None:
    stand_in.delay = 0.3

    with pytest.raises(EmbeddingsUnavailableError, match=r"unreachable \(ReadTimeoutError\)"):
        _client(stand_in, timeout=0.1, max_attempts=2).embed(["x"])

    assert len(stand_in.requests) == 2


def test_a_bounded_call_cuts_a_slow_attempt_short_and_does_not_retry(
    stand_in: StandInEmbeddingsServer,
) -> None:
    stand_in.delay = 2.0
    sleeps: list[float] = []

    with pytest.raises(EmbeddingsUnavailableError) as caught:
        _client(stand_in, sleeps, timeout=30.0).embed(["x"], within=0.2)

    message = "embeddings endpoint unreachable (ReadTimeoutError) after 1 attempts"
    assert str(caught.value) == message
    assert (len(stand_in.requests), sleeps) == (1, []), "no time was left for a retry"


def test_a_bounded_call_skips_a_retry_it_would_have_to_wait_too_long_for(
    stand_in: StandInEmbeddingsServer,
) -> None:
    stand_in.fail_next(503, retry_after="5")
    sleeps: list[float] = []

    with pytest.raises(EmbeddingsUnavailableError, match=r"HTTP 503 .*after 1 attempts"):
        _client(stand_in, sleeps).embed(["x"], within=2.0)

    assert sleeps == [], "waiting 5 s would overrun the 2 s allowed"


def test_a_bounded_call_retries_while_time_is_left(stand_in: StandInEmbeddingsServer) -> None:
    stand_in.fail_next(503, retry_after="1")
    sleeps: list[float] = []

    vectors = _client(stand_in, sleeps).embed(["x"], within=5.0)

    assert (len(vectors), sleeps) == (1, [1.0])


def test_an_endpoint_nobody_listens_on_is_unavailable_and_unnamed() -> None:
    with serve_embeddings() as gone:
        url = gone.url
    client = EmbeddingsClient(url, "m", api_key=API_KEY, sleep=lambda _: None)

    with pytest.raises(EmbeddingsUnavailableError) as caught:
        client.embed([SECRET_TEXT])

    message = str(caught.value)
    assert message == "embeddings endpoint unreachable (NewConnectionError) after 3 attempts"
    assert url not in message
    assert API_KEY not in message
    # urllib3's exception names the URL: it is not chained into logs either.
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


# --- the same server with all-MiniLM-L6-v2 ---------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbeddingProvider:
    return MiniLMEmbeddingProvider()


@pytest.fixture(scope="module")
def minilm_server(minilm: MiniLMEmbeddingProvider) -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, api_key=API_KEY, service=MiniLMService(minilm)) as running:
        yield running


def test_the_client_gets_minilm_vectors_from_the_model_server(
    minilm_server: StandInEmbeddingsServer, minilm: MiniLMEmbeddingProvider
) -> None:
    texts = ["how are refunds authorised", "Refunds are authorised by the team lead."]

    vectors = _client(minilm_server, dimensions=384).embed(texts)

    # float32 values survive JSON exactly: the client holds the model's very vectors.
    assert vectors == minilm.encode(texts)[0].tolist()
    assert minilm_server.requests[-1].body["dimensions"] == 384


def test_the_model_server_refuses_other_dimensions_with_openais_error(
    minilm_server: StandInEmbeddingsServer,
) -> None:
    response = _post(minilm_server, {"model": "all-MiniLM-L6-v2", "input": "x", "dimensions": 16})

    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": "This model answers 384 dimensions only.",
        "type": "invalid_request_error",
        "param": "dimensions",
        "code": None,
    }
