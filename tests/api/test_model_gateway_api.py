"""The model gateway over HTTP, through the local runtime, against the stand-in provider on
loopback: link outcomes with the answer byte for byte, header rules with nothing sent, what
reaches the provider, streams, and the model call logs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from api_support import bearer, error_of, wait_for_attribution

from context_ledger.auth.principal import SCOPE_AUDIT_READ
from context_ledger.db import connection
from context_ledger.local.provider_server import StandInProviderServer, serve_provider
from context_ledger.settings import get_settings

CHAT = "/api/v1/models/chat/completions"
EMBEDDINGS = "/api/v1/models/embeddings"
LOGS = "/api/v1/models/logs"
RETRIEVE = "/api/v1/context/retrieve"
PROVIDER_KEY = "sk-provider-secret"
#: Sent as bytes with odd spacing: a gateway that re-encoded the request would change it.
CHAT_BODY = b'{"model":  "echo-1", "messages": [{"role": "user", "content": "refunds?"}]}'
STREAM_BODY = (
    b'{"model": "echo-1", "stream": true, "stream_options": {"include_usage": true},'
    b' "messages": [{"role": "user", "content": "refunds, streamed"}]}'
)
JSON = {"Content-Type": "application/json"}
EVENTS = Path(__file__).resolve().parents[2] / "events"


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandInProviderServer]:
    with serve_provider(api_key=PROVIDER_KEY) as server:
        yield server


@pytest.fixture
def provider(
    runtime, stand_in: StandInProviderServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StandInProviderServer]:
    """The runtime's functions read these settings per request, as a redeployed Lambda would."""
    stand_in.reset()
    monkeypatch.setenv("KEYSTONE_MODELS_PROVIDER_URL", stand_in.url)
    monkeypatch.setenv("KEYSTONE_MODELS_PROVIDER_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("KEYSTONE_MODELS_CONTEXT_LINK_WAIT_MS", "300")
    get_settings.cache_clear()
    yield stand_in
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture
def alice_token(org, token) -> str:
    return token(org, "alice")


@pytest.fixture
def alice(alice_token) -> dict[str, str]:
    return bearer(alice_token)


def retrieval_of(api: httpx.Client, headers: dict[str, str]) -> dict[str, str]:
    """A real retrieval (organisation and personal space) whose record the writer has stored."""
    response = api.post(RETRIEVE, headers=headers, json={"query": "refund approvals"})
    assert response.status_code == 200, response.text
    answer = response.json()
    wait_for_attribution(answer["attributionId"])
    return answer


def chat(
    api: httpx.Client, headers: dict[str, str], body: bytes = CHAT_BODY, **extra: str
) -> httpx.Response:
    return api.post(CHAT, headers={**headers, **JSON, **extra}, content=body)


def assert_provider_answer(response: httpx.Response, provider: StandInProviderServer) -> None:
    (exchange,) = provider.exchanges
    assert response.status_code == exchange.status
    assert response.content == exchange.answer


def test_a_call_naming_its_retrieval_is_linked_and_the_link_verifies(
    api, org, token, alice, provider
) -> None:
    retrieval = retrieval_of(api, alice)

    response = chat(
        api,
        alice,
        **{"X-Keystone-Context-Request-Id": retrieval["requestId"], "X-Keystone-Client": "ed/1.2"},
    )

    assert_provider_answer(response, provider)
    assert response.headers["X-Keystone-Context-Link"] == "linked"
    gateway_request_id = response.headers["X-Keystone-Gateway-Request-Id"]
    auditor = bearer(token(org, "dora", SCOPE_AUDIT_READ))
    evidence = api.get(
        "/api/v1/observability/compliance-evidence",
        params={"category": "context_attribution_link"},
        headers=auditor,
    ).json()
    (link,) = evidence["records"]
    assert link["record"]["responseId"] == gateway_request_id
    assert link["record"]["requestId"] == retrieval["requestId"]
    verified = api.get("/api/v1/observability/chain/verify?full=true", headers=auditor).json()
    assert verified["ok"] is True
    assert verified["checked"] == 2


def test_no_keystone_header_nor_the_callers_token_reaches_the_provider(
    api, alice, alice_token, provider
) -> None:
    retrieval = retrieval_of(api, alice)
    metadata = json.dumps({"context_request_id": retrieval["requestId"]})

    response = chat(
        api,
        alice,
        **{
            "X-Keystone-Context-Request-Id": retrieval["requestId"],
            "X-Keystone-Metadata": metadata,
            "X-Keystone-Client": "editor/1.4.2",
            "Cookie": "session=abc",
        },
    )

    assert response.status_code == 200
    (exchange,) = provider.exchanges
    sent = {name.lower(): value for name, value in exchange.headers.items()}
    assert not [name for name in sent if name.startswith("x-keystone")]
    assert "cookie" not in sent
    assert sent["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert alice_token not in json.dumps(exchange.headers)
    assert exchange.body == CHAT_BODY
    assert exchange.path == "/v1/chat/completions"


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"X-Keystone-Context-Request-Id": "bad id"}, id="id-with-space"),
        pytest.param({"X-Keystone-Context-Request-Id": "_x"}, id="id-not-starting-alnum"),
        pytest.param({"X-Keystone-Context-Request-Id": "x" * 129}, id="id-too-long"),
        pytest.param(
            {
                "X-Keystone-Context-Request-Id": "req_1",
                "X-Keystone-Metadata": '{"context_request_id": "req_2"}',
            },
            id="conflicting-metadata",
        ),
        pytest.param({"X-Keystone-Metadata": "req_1"}, id="metadata-not-json"),
        pytest.param({"X-Keystone-Metadata": '{"context_request_id": 1}'}, id="metadata-id-number"),
    ],
)
def test_bad_keystone_headers_are_400_and_nothing_is_sent(api, alice, provider, headers) -> None:
    response = chat(api, alice, **headers)

    assert error_of(response) == (400, "invalid_request")
    assert provider.exchanges == []


def test_a_body_that_is_not_json_is_400_and_nothing_is_sent(api, alice, provider) -> None:
    response = chat(api, alice, b"model=echo-1")

    assert error_of(response) == (400, "invalid_request")
    assert provider.exchanges == []


def test_a_bad_token_is_401_and_nothing_is_sent(api, provider) -> None:
    response = chat(api, bearer("not-a-token"))

    assert error_of(response) == (401, "unauthorized")
    assert provider.exchanges == []


def test_an_unknown_id_is_not_found_after_the_wait(api, alice, provider) -> None:
    response = chat(api, alice, **{"X-Keystone-Context-Request-Id": "req_never_made"})

    assert response.headers["X-Keystone-Context-Link"] == "not_found"
    assert_provider_answer(response, provider)


def test_another_persons_retrieval_is_denied(api, org, token, alice, provider) -> None:
    retrieval = retrieval_of(api, alice)
    bob = bearer(token(org, "bob"))

    response = chat(api, bob, **{"X-Keystone-Context-Request-Id": retrieval["requestId"]})

    assert response.headers["X-Keystone-Context-Link"] == "denied"
    assert_provider_answer(response, provider)


def test_a_caller_that_is_not_a_person_is_denied(api, org, token, alice, provider) -> None:
    retrieval = retrieval_of(api, alice)
    service = bearer(token(org, "alice", SCOPE_AUDIT_READ, service=True))

    response = chat(api, service, **{"X-Keystone-Context-Request-Id": retrieval["requestId"]})

    assert response.headers["X-Keystone-Context-Link"] == "denied"
    assert_provider_answer(response, provider)


def test_a_failing_database_is_error_and_the_answer_is_unchanged(api, alice, provider) -> None:
    retrieval = retrieval_of(api, alice)

    with connection() as blocker:  # the link's reads wait out their lock timeout, then fail
        blocker.execute("LOCK TABLE attributions IN ACCESS EXCLUSIVE MODE")
        response = chat(api, alice, **{"X-Keystone-Context-Request-Id": retrieval["requestId"]})

    assert response.headers["X-Keystone-Context-Link"] == "error"
    assert_provider_answer(response, provider)


def test_a_stream_carries_the_link_outcome_as_a_header_and_the_providers_bytes_alone(
    api, alice, provider
) -> None:
    retrieval = retrieval_of(api, alice)

    response = chat(
        api, alice, STREAM_BODY, **{"X-Keystone-Context-Request-Id": retrieval["requestId"]}
    )

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["X-Keystone-Context-Link"] == "linked"
    (exchange,) = provider.exchanges
    assert response.content == exchange.answer


def test_embeddings_are_passed_through(api, alice, provider) -> None:
    body = b'{"model": "embed-1", "input": ["refund approvals"]}'

    response = api.post(EMBEDDINGS, headers={**alice, **JSON}, content=body)

    assert_provider_answer(response, provider)
    assert provider.exchanges[0].path == "/v1/embeddings"
    assert response.headers["X-Keystone-Gateway-Request-Id"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_provider_error_is_passed_through_with_the_link_outcome(
    api, alice, provider, stream
) -> None:
    retrieval = retrieval_of(api, alice)
    provider.fail_next(500)
    named = {"X-Keystone-Context-Request-Id": retrieval["requestId"]}

    response = chat(api, alice, STREAM_BODY if stream else CHAT_BODY, **named)
    unknown = chat(api, alice, **{"X-Keystone-Context-Request-Id": "req_never_made"})

    assert response.status_code == 500
    assert response.content == provider.exchanges[0].answer
    assert response.headers["X-Keystone-Context-Link"] == "linked"
    assert unknown.headers["X-Keystone-Context-Link"] == "not_found"


def test_without_a_provider_the_gateway_is_503(api, alice, provider, monkeypatch) -> None:
    monkeypatch.delenv("KEYSTONE_MODELS_PROVIDER_URL")
    get_settings.cache_clear()

    assert error_of(chat(api, alice)) == (503, "service_unavailable")


def test_logs_list_own_calls_and_for_auditors_the_organisations(
    api, org, other_org, token, alice, provider
) -> None:
    retrieval = retrieval_of(api, alice)
    named = {"X-Keystone-Context-Request-Id": retrieval["requestId"], "X-Keystone-Client": "ed/2"}
    bob = bearer(token(org, "bob"))
    made = [chat(api, alice, **named), chat(api, alice, **named), chat(api, bob, **named)]
    chat(api, bearer(token(other_org, "alice", SCOPE_AUDIT_READ)), **named)
    chat(api, alice)  # a call without a retrieval
    query = {"context_request_id": retrieval["requestId"]}

    own = api.get(LOGS, params=query, headers=alice).json()
    auditor = bearer(token(org, "dora", SCOPE_AUDIT_READ))
    audited = api.get(LOGS, params=query, headers=auditor).json()
    foreign = api.get(LOGS, params=query, headers=bearer(token(other_org, "zed"))).json()

    ids = [r.headers["X-Keystone-Gateway-Request-Id"] for r in made]
    assert [c["gatewayRequestId"] for c in own["calls"]] == ids[1::-1]
    assert [c["gatewayRequestId"] for c in audited["calls"]] == ids[::-1]
    assert foreign == {"calls": [], "nextCursor": None}
    first = own["calls"][-1]
    assert first["userId"] == "alice"
    assert first["clientId"] == "api-tests"
    assert (first["clientName"], first["clientVersion"]) == ("ed", "2")
    assert (first["endpoint"], first["model"], first["stream"], first["status"]) == (
        "chat.completions",
        "echo-1",
        False,
        200,
    )
    assert first["usage"]["totalTokens"] > 0
    assert first["contextRequestId"] == retrieval["requestId"]
    assert first["contextLink"] == "linked"
    assert [c["contextLink"] for c in audited["calls"]] == ["denied", "linked", "linked"]


def test_logs_find_the_calls_of_a_retrieval_named_by_either_of_its_ids(
    api, org, token, alice, provider
) -> None:
    retrieval = retrieval_of(api, alice)
    names = (retrieval["requestId"], retrieval["attributionId"])
    made = [
        chat(api, alice, **{"X-Keystone-Context-Request-Id": name}).headers[
            "X-Keystone-Gateway-Request-Id"
        ]
        for name in names
    ]
    chat(api, alice, **{"X-Keystone-Context-Request-Id": retrieval_of(api, alice)["requestId"]})
    chat(api, alice)

    for name in names:
        found = api.get(LOGS, params={"context_request_id": name}, headers=alice).json()
        assert [c["gatewayRequestId"] for c in found["calls"]] == made[::-1], name
        assert [c["contextRequestId"] for c in found["calls"]] == list(names[::-1])


def test_logs_page_with_the_cursor(api, alice, provider) -> None:
    made = [chat(api, alice).headers["X-Keystone-Gateway-Request-Id"] for _ in range(3)]

    first = api.get(LOGS, params={"limit": 2}, headers=alice).json()
    second = api.get(LOGS, params={"limit": 2, "cursor": first["nextCursor"]}, headers=alice).json()

    pages = [c["gatewayRequestId"] for c in first["calls"] + second["calls"]]
    assert pages == made[::-1]
    assert second["nextCursor"] is None


@pytest.mark.parametrize(
    "params",
    [{"cursor": "not-a-cursor"}, {"context_request_id": "bad id"}, {"limit": "0"}],
)
def test_bad_log_queries_are_422(api, alice, provider, params) -> None:
    assert error_of(api.get(LOGS, params=params, headers=alice)) == (422, "validation_failed")


def test_logs_refuse_a_query_naming_another_user(api, alice, provider) -> None:
    response = api.get(LOGS, params={"userId": "bob"}, headers=alice)

    assert error_of(response) == (403, "forbidden")


def test_an_unknown_gateway_id_matches_nothing(api, alice, provider) -> None:
    response = api.get(LOGS, params={"context_request_id": str(uuid.uuid4())}, headers=alice)

    assert response.json() == {"calls": [], "nextCursor": None}


@pytest.mark.parametrize(
    ("name", "link"),
    [
        ("models-chat-completions.json", "not_found"),
        ("models-embeddings.json", "not_found"),
        ("models-logs.json", None),
    ],
)
def test_the_sample_events_invoke_the_function(runtime, api, org, provider, name, link) -> None:
    event = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    event["requestContext"]["authorizer"]["lambda"]["orgId"] = str(org.id)

    result = runtime.invoke("ModelGatewayFunction", event)

    assert result["statusCode"] == 200, result["body"]
    assert result["headers"].get("x-keystone-context-link") == link
