"""POST /api/v1/embeddings through the local runtime: the embeddings function as deployed.

The template's default provider is all-MiniLM-L6-v2, so these requests reach the real model the
function ships, behind the same authorizer as every other route.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from api_support import bearer

from context_ledger.auth.api_keys import create_api_key
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection
from context_ledger.embeddings.client import EmbeddingsClient, EmbeddingsUnavailableError
from context_ledger.embeddings.similarity import cosine
from context_ledger.local.runtime import LocalRuntime
from context_ledger.settings import get_settings

EMBEDDINGS = "/api/v1/embeddings"
MODEL = "all-MiniLM-L6-v2"


@pytest.fixture
def service_key(org) -> str:
    """What the deployment's own functions present: a service API key."""
    with connection() as conn:
        return create_api_key(conn, org_id=org.id, user_id="indexer", service=True).key


def test_an_api_key_gets_openais_answer_with_384_dimensional_vectors(api, service_key) -> None:
    body = {"model": MODEL, "input": ["how are refunds authorised", "who signs off refunds"]}

    response = api.post(EMBEDDINGS, headers=bearer(service_key), json=body)

    assert response.status_code == 200, response.text
    answer = response.json()
    assert [(item["object"], item["index"]) for item in answer["data"]] == [
        ("embedding", 0),
        ("embedding", 1),
    ]
    assert {len(item["embedding"]) for item in answer["data"]} == {384}
    assert (answer["object"], answer["model"]) == ("list", MODEL)
    # [CLS] how are ref ##unds authorised [SEP], [CLS] who signs off ref ##unds [SEP]
    assert answer["usage"] == {"prompt_tokens": 14, "total_tokens": 14}


def test_the_production_client_embeds_through_the_function(
    runtime: LocalRuntime, api, service_key
) -> None:
    client = EmbeddingsClient(f"{runtime.url}/api/v1", MODEL, dimensions=384, api_key=service_key)
    try:
        query, related, unrelated = client.embed(
            [
                "how are refunds authorised",
                "Who approves giving customers their money back?",
                "The cat slept on the warm windowsill all afternoon.",
            ]
        )
    finally:
        client.close()

    assert cosine(query, related) > cosine(query, unrelated) + 0.2


def test_a_token_that_does_not_verify_is_a_401_in_openais_shape(api) -> None:
    response = api.post(EMBEDDINGS, headers=bearer("ctxl_not-a-key"), json={"model": MODEL})

    assert response.status_code == 401
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == (
        "invalid_request_error",
        "invalid_api_key",
        None,
    )


def test_the_client_is_refused_without_retrying_a_bad_key(runtime: LocalRuntime, api) -> None:
    client = EmbeddingsClient(f"{runtime.url}/api/v1", MODEL, api_key="ctxl_not-a-key")

    with pytest.raises(EmbeddingsUnavailableError, match=r"HTTP 401 \(invalid_api_key\)$"):
        client.embed(["x"])
    client.close()


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": MODEL, "input": []}, "input"),
        ({"model": MODEL, "input": "x", "dimensions": 1536}, "dimensions"),
        ({"model": MODEL, "input": "x", "encoding_format": "int8"}, "encoding_format"),
    ],
)
def test_bad_input_is_a_400_in_openais_shape(api, service_key, body, param) -> None:
    response = api.post(EMBEDDINGS, headers=bearer(service_key), json=body)

    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", param, None)


def test_a_body_that_is_not_json_is_a_400(api, service_key) -> None:
    response = api.post(
        EMBEDDINGS,
        headers={**bearer(service_key), "Content-Type": "application/json"},
        content=b"{not json",
    )

    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_without_a_credential_the_gateway_answers_401(api) -> None:
    response = api.post(EMBEDDINGS, json={"model": MODEL, "input": "x"})

    # API Gateway's own answer (the authorizer never runs), as in AWS.
    assert response.status_code == 401


# --- who may embed, and what a call costs ------------------------------------------------------


def openai_error(response) -> tuple[int, str, str]:
    error = response.json()["error"]
    return response.status_code, error["type"], error["code"]


@pytest.mark.parametrize("scopes", [(), (SCOPE_CONTEXT_ADMIN,)], ids=["user", "context admin"])
def test_a_persons_token_is_refused_with_403(api, org, token, scopes) -> None:
    body = {"model": MODEL, "input": "refunds"}

    response = api.post(EMBEDDINGS, headers=bearer(token(org, "alice", *scopes)), json=body)

    assert openai_error(response) == (403, "invalid_request_error", "forbidden")
    assert "service" in response.json()["error"]["message"]


def test_a_persons_api_key_is_refused_with_403(api, org) -> None:
    with connection() as conn:
        key = create_api_key(conn, org_id=org.id, user_id="alice", name="laptop").key

    response = api.post(EMBEDDINGS, headers=bearer(key), json={"model": MODEL, "input": "x"})

    assert openai_error(response) == (403, "invalid_request_error", "forbidden")


def test_a_service_token_is_served(api, org, token) -> None:
    service = bearer(token(org, "indexer", service=True))

    response = api.post(EMBEDDINGS, headers=service, json={"model": MODEL, "input": "refunds"})

    assert response.status_code == 200, response.text
    assert len(response.json()["data"]) == 1


@pytest.fixture
def ten_a_minute(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An API key may make 10 requests a minute, all 10 at once."""
    monkeypatch.setenv("KEYSTONE_RATE_LIMIT_API_KEY_PER_MINUTE", "10")
    monkeypatch.setenv("KEYSTONE_RATE_LIMIT_BURST_SECONDS", "60")
    get_settings.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()


def test_each_input_counts_against_the_rate_limit_as_one_request(
    api, service_key, ten_a_minute
) -> None:
    def embed(n: int):
        body = {"model": MODEL, "input": [f"refund number {i}" for i in range(n)]}
        return api.post(EMBEDDINGS, headers=bearer(service_key), json=body)

    eight, three, two, one = embed(8), embed(3), embed(2), embed(1)

    assert (eight.status_code, two.status_code) == (200, 200)
    # 8 + 3 is over the 10; refused, it is not charged: 8 + 2 is the 10 exactly
    assert openai_error(three) == (429, "invalid_request_error", "rate_limited")
    assert "counts as 3" in three.json()["error"]["message"]
    assert openai_error(one)[0] == 429
    assert 1 <= int(one.headers["Retry-After"]) <= 6  # one request's worth: 6 s


def test_a_call_larger_than_the_burst_waits_for_a_rested_bucket_then_is_served(
    api, service_key, ten_a_minute
) -> None:
    body = {"model": MODEL, "input": [f"refund number {i}" for i in range(12)]}

    first = api.post(EMBEDDINGS, headers=bearer(service_key), json=body)
    second = api.post(EMBEDDINGS, headers=bearer(service_key), json={"model": MODEL, "input": "x"})

    assert first.status_code == 200, first.text
    # 12 requests' worth at 10 a minute: the bucket is 2 in debt, the next one waits 18 s
    assert openai_error(second)[0] == 429
    assert 12 <= int(second.headers["Retry-After"]) <= 18
