"""The gateway service on a real PostgreSQL against the stand-in provider on loopback: every link
outcome, the answer byte for byte in each, the link in the chain, and the model call log."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager

import psycopg
import pytest
from evidence_support import key_ring_from_env

from context_ledger.attribution.events import AttributionEvent, new_request_id
from context_ledger.attribution.writer import write_attribution
from context_ledger.auth.principal import SCOPE_AUDIT_READ, Principal, PrincipalKind
from context_ledger.db import connection
from context_ledger.evidence.chain import org_chain, verify
from context_ledger.evidence.keys import KeyRing
from context_ledger.evidence.listing import list_evidence
from context_ledger.local.provider_server import StandInProviderServer, serve_provider
from context_ledger.model_gateway.calls import list_calls
from context_ledger.model_gateway.headers import CONTEXT_LINK, GATEWAY_REQUEST_ID, GatewayHeaders
from context_ledger.model_gateway.linking import (
    AUDIT_EVENT,
    LinkOutcome,
    LinkResult,
    audit_logger,
    link_retrieval,
)
from context_ledger.model_gateway.provider import Endpoint, ProviderClient
from context_ledger.model_gateway.service import (
    CallRequest,
    GatewayService,
    PlainAnswer,
    StreamedAnswer,
)

KEY = "gateway-test-key-" + "k" * 32
CHAT = b'{"model": "echo-1", "messages": [{"role": "user", "content": "refunds?"}]}'
STREAM = (
    b'{"model":"echo-1","stream":true,"stream_options":{"include_usage":true},'
    b'"messages":[{"role":"user","content":"refunds, streamed"}]}'
)


@pytest.fixture
def keys(db: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KeyRing]:
    with key_ring_from_env(
        monkeypatch,
        KEYSTONE_ENVIRONMENT="local",
        CONTEXT_LEDGER_HOME=str(tmp_path),
        DATABASE_URL=db,
        KEYSTONE_EVIDENCE_HMAC_KEY=KEY,
        KEYSTONE_EVIDENCE_HMAC_SECRET_ARN=None,
    ) as ring:
        yield ring


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandInProviderServer]:
    with serve_provider(api_key="sk-provider") as server:
        yield server


@pytest.fixture
def provider(stand_in: StandInProviderServer) -> Iterator[StandInProviderServer]:
    stand_in.reset()
    return stand_in


@pytest.fixture
def client(provider: StandInProviderServer) -> Iterator[ProviderClient]:
    client = ProviderClient(provider.url, api_key="sk-provider")
    yield client
    client.close()


def new_org(db: str, name: str) -> uuid.UUID:
    with psycopg.connect(db) as conn:
        return conn.execute(
            "INSERT INTO organisations (name) VALUES (%s) RETURNING id", (name,)
        ).fetchone()[0]


@pytest.fixture
def org_id(db: str) -> uuid.UUID:
    return new_org(db, "Acme")


def person(org_id: uuid.UUID, user: str, *scopes: str) -> Principal:
    return Principal(org_id=org_id, user_id=user, client_id="editor", scopes=frozenset(scopes))


def unrecorded(org_id: uuid.UUID, user: str = "alice") -> AttributionEvent:
    """A retrieval's attribution event, before the writer has recorded it."""
    return AttributionEvent.model_validate(
        {
            "recordId": str(uuid.uuid4()),
            "category": "context_attribution",
            "orgId": str(org_id),
            "record": {
                "requestId": f"req_{uuid.uuid4().hex}",
                "attributionId": str(uuid.uuid4()),
                "userId": user,
            },
        }
    )


def record(event: AttributionEvent, keys: KeyRing) -> AttributionEvent:
    """Record it as the attribution writer does."""
    with connection() as conn:
        write_attribution(conn, event=event, keys=keys)
    return event


def retrieval(org_id: uuid.UUID, keys: KeyRing, user: str = "alice") -> AttributionEvent:
    return record(unrecorded(org_id, user), keys)


def chat(principal: Principal, context_request_id: str | None, body: bytes = CHAT) -> CallRequest:
    headers = GatewayHeaders(context_request_id, client_name="editor", client_version="1.4.2")
    return CallRequest.of(principal, Endpoint.CHAT_COMPLETIONS, body, headers)


def plain(answer: PlainAnswer | StreamedAnswer) -> PlainAnswer:
    assert isinstance(answer, PlainAnswer)
    return answer


def assert_passed_through(answer: PlainAnswer, provider: StandInProviderServer) -> None:
    (exchange,) = provider.exchanges
    assert answer.status == exchange.status
    assert answer.body == exchange.answer


def dead_database() -> AbstractContextManager[psycopg.Connection]:
    """A database that refuses connections: nothing listens on port 1."""
    return psycopg.connect("postgresql://127.0.0.1:1/none", connect_timeout=2)


def test_a_linked_call_passes_the_answer_through_and_its_link_verifies_in_the_chain(
    keys, org_id, client, provider
) -> None:
    event = retrieval(org_id, keys)
    service = GatewayService(client, wait_ms=0)

    answer = plain(service.call(chat(person(org_id, "alice"), event.record.request_id)))

    assert_passed_through(answer, provider)
    assert answer.headers[CONTEXT_LINK] == "linked"
    gateway_request_id = answer.headers[GATEWAY_REQUEST_ID]
    with connection() as conn:
        links = list_evidence(conn, chain=org_chain(org_id), category="context_attribution_link")
        verified = verify(conn, chain=org_chain(org_id), keys=keys)
    assert verified.ok
    assert verified.checked == 2
    (link,) = links.entries
    assert link.record["responseId"] == gateway_request_id
    assert link.record["attributionId"] == str(event.record.attribution_id)
    assert link.record["requestId"] == event.record.request_id
    assert link.record["linkedBy"] == "alice"


def test_the_call_is_logged_with_client_model_status_usage_and_outcome(
    keys, org_id, client, provider
) -> None:
    event = retrieval(org_id, keys)
    alice = person(org_id, "alice")

    answer = plain(GatewayService(client, wait_ms=0).call(chat(alice, event.record.request_id)))

    with connection() as conn:
        (logged,) = list_calls(conn, alice).calls
    call = logged.call
    assert str(call.gateway_request_id) == answer.headers[GATEWAY_REQUEST_ID]
    assert (call.org_id, call.user_id, call.client_id) == (org_id, "alice", "editor")
    assert (call.client_name, call.client_version) == ("editor", "1.4.2")
    assert (call.endpoint, call.model, call.stream, call.status) == (
        Endpoint.CHAT_COMPLETIONS,
        "echo-1",
        False,
        200,
    )
    assert call.usage is not None
    assert call.usage.prompt_tokens == 1
    assert call.usage.total_tokens == call.usage.prompt_tokens + call.usage.completion_tokens
    assert call.context_request_id == event.record.request_id
    assert call.link_outcome is LinkOutcome.LINKED
    assert call.latency_ms >= call.link_latency_ms >= 0


def test_the_attribution_id_names_the_retrieval_as_well(keys, org_id, client, provider) -> None:
    event = retrieval(org_id, keys)

    answer = plain(
        GatewayService(client, wait_ms=0).call(
            chat(person(org_id, "alice"), str(event.record.attribution_id))
        )
    )

    assert answer.headers[CONTEXT_LINK] == "linked"
    assert_passed_through(answer, provider)


def test_a_record_that_lands_while_the_gateway_waits_is_linked(
    keys, org_id, client, provider
) -> None:
    event = unrecorded(org_id)
    late = threading.Timer(0.3, record, args=(event, keys))
    late.start()
    try:
        answer = plain(
            GatewayService(client, wait_ms=30_000).call(
                chat(person(org_id, "alice"), event.record.request_id)
            )
        )
    finally:
        late.join()

    assert answer.headers[CONTEXT_LINK] == "linked"
    assert_passed_through(answer, provider)


def _link_on_a_fake_clock(
    org_id: uuid.UUID, context_request_id: str, wait_ms: int
) -> tuple[LinkResult, list[float]]:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    result = link_retrieval(
        person(org_id, "alice"),
        context_request_id=context_request_id,
        response_id=str(uuid.uuid4()),
        wait_ms=wait_ms,
        clock=lambda: now[0],
        sleep=sleep,
    )
    return result, slept


@pytest.mark.parametrize("unknown", [new_request_id(), str(uuid.uuid4())])
def test_an_unknown_id_is_polled_for_the_whole_wait_then_not_found(keys, org_id, unknown) -> None:
    result, slept = _link_on_a_fake_clock(org_id, unknown, wait_ms=750)

    assert result.outcome is LinkOutcome.NOT_FOUND
    assert sum(slept) == pytest.approx(0.75)
    assert len(slept) > 1, "the records are looked for repeatedly, not once after the wait"
    assert result.latency_ms == 750


@pytest.mark.parametrize("impossible", ["req_never_recorded", "my-trace:42", "REQ_" + "0" * 32])
def test_an_id_the_service_never_gives_is_not_found_without_waiting(
    keys, org_id, impossible
) -> None:
    """No record of it can be on its way, so the caller's answer does not wait for one."""
    result, slept = _link_on_a_fake_clock(org_id, impossible, wait_ms=10_000)

    assert result.outcome is LinkOutcome.NOT_FOUND
    assert slept == []


def test_not_found_after_the_wait_leaves_the_answer_unchanged(
    keys, org_id, client, provider
) -> None:
    service = GatewayService(client, wait_ms=100)

    answer = plain(service.call(chat(person(org_id, "alice"), "req_never_recorded")))

    assert answer.headers[CONTEXT_LINK] == "not_found"
    assert_passed_through(answer, provider)


def test_another_organisations_retrieval_is_not_found(db, keys, org_id, client, provider) -> None:
    foreign = retrieval(new_org(db, "Globex"), keys)

    answer = plain(
        GatewayService(client, wait_ms=0).call(
            chat(person(org_id, "alice"), foreign.record.request_id)
        )
    )

    assert answer.headers[CONTEXT_LINK] == "not_found"
    assert_passed_through(answer, provider)


@pytest.mark.parametrize(
    "caller",
    [
        pytest.param(lambda org: person(org, "bob"), id="another-persons-retrieval"),
        pytest.param(
            lambda org: Principal(
                org_id=org,
                user_id="alice",
                client_id="ci",
                scopes=frozenset({SCOPE_AUDIT_READ}),
                kind=PrincipalKind.SERVICE,
            ),
            id="caller-is-not-a-person",
        ),
    ],
)
def test_denied_links_nothing_and_leaves_the_answer_unchanged(
    keys, org_id, client, provider, caller
) -> None:
    event = retrieval(org_id, keys)

    answer = plain(
        GatewayService(client, wait_ms=0).call(chat(caller(org_id), event.record.request_id))
    )

    assert answer.headers[CONTEXT_LINK] == "denied"
    assert_passed_through(answer, provider)
    with connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM attribution_links").fetchone()["n"] == 0


def test_an_auditor_links_another_persons_retrieval(keys, org_id, client, provider) -> None:
    event = retrieval(org_id, keys)
    auditor = person(org_id, "dora", SCOPE_AUDIT_READ)

    answer = plain(GatewayService(client, wait_ms=0).call(chat(auditor, event.record.request_id)))

    assert answer.headers[CONTEXT_LINK] == "linked"
    assert_passed_through(answer, provider)


def test_a_failing_database_is_error_and_leaves_the_answer_unchanged(
    keys, org_id, client, provider
) -> None:
    service = GatewayService(client, wait_ms=750, connect=dead_database)

    answer = plain(service.call(chat(person(org_id, "alice"), "req_anything")))

    assert answer.status == 200
    assert answer.headers[CONTEXT_LINK] == "error"
    assert_passed_through(answer, provider)


def test_a_locked_attribution_table_is_error_within_the_lock_timeout(
    keys, org_id, client, provider
) -> None:
    event = retrieval(org_id, keys)
    with connection() as blocker:
        blocker.execute("LOCK TABLE attributions IN ACCESS EXCLUSIVE MODE")
        answer = plain(
            GatewayService(client, wait_ms=0).call(
                chat(person(org_id, "alice"), event.record.request_id)
            )
        )

    assert answer.headers[CONTEXT_LINK] == "error"
    assert_passed_through(answer, provider)


def links_of(org_id: uuid.UUID) -> list[dict]:
    with connection() as conn:
        chain = org_chain(org_id)
        return [
            e.record
            for e in list_evidence(conn, chain=chain, category="context_attribution_link").entries
        ]


def test_a_stream_is_linked_as_its_answer_starts_and_carries_the_outcome_as_a_header(
    keys, org_id, client, provider
) -> None:
    """GIVEN a provider that has sent its stream's headers but no byte of its body yet, WHEN
    the gateway answers, THEN the link is appended and its outcome is a response header before
    any of the body is relayed, and the body is the provider's, byte for byte."""
    event = retrieval(org_id, keys)
    alice = person(org_id, "alice")
    released = provider.hold_streams()
    try:
        answer = GatewayService(client, wait_ms=0).call(
            chat(alice, event.record.request_id, STREAM)
        )
        assert isinstance(answer, StreamedAnswer)
        assert answer.headers[CONTEXT_LINK] == "linked"
        (link,) = links_of(org_id)
        assert link["responseId"] == answer.headers[GATEWAY_REQUEST_ID]
    finally:
        released.set()

    assert answer.headers["content-type"].startswith("text/event-stream")
    streamed = b"".join(answer.chunks)
    (exchange,) = provider.exchanges
    assert streamed == exchange.answer
    with connection() as conn:
        (logged,) = list_calls(conn, alice).calls
    assert logged.call.stream is True
    assert logged.call.link_outcome is LinkOutcome.LINKED
    assert logged.call.usage is not None
    assert logged.call.usage.prompt_tokens == 2


def test_a_stream_without_a_context_id_is_the_providers_bytes_alone(
    keys, org_id, client, provider
) -> None:
    answer = GatewayService(client, wait_ms=0).call(chat(person(org_id, "alice"), None, STREAM))

    assert isinstance(answer, StreamedAnswer)
    assert b"".join(answer.chunks) == provider.exchanges[0].answer


@pytest.mark.parametrize("status", [400, 429, 500])
def test_a_provider_error_passes_through_unchanged_with_its_link_outcome(
    keys, org_id, client, provider, status
) -> None:
    """The call carried the retrieval to the provider whatever it answered: linked like any
    answer, the outcome in the header, the error body and status the provider's."""
    event = retrieval(org_id, keys)
    alice = person(org_id, "alice")
    provider.fail_next(status)

    answer = plain(GatewayService(client, wait_ms=0).call(chat(alice, event.record.request_id)))

    assert_passed_through(answer, provider)
    assert answer.status == status
    assert answer.headers[CONTEXT_LINK] == "linked"
    (link,) = links_of(org_id)
    assert link["responseId"] == answer.headers[GATEWAY_REQUEST_ID]
    with connection() as conn:
        (logged,) = list_calls(conn, alice).calls
    assert (logged.call.status, logged.call.link_outcome) == (status, LinkOutcome.LINKED)


def test_a_provider_error_naming_an_unknown_retrieval_is_not_found(
    keys, org_id, client, provider
) -> None:
    provider.fail_next(500)

    answer = plain(GatewayService(client, wait_ms=0).call(chat(person(org_id, "a"), "req_none")))

    assert_passed_through(answer, provider)
    assert answer.headers[CONTEXT_LINK] == "not_found"


def test_an_unreachable_provider_is_503_and_logged(keys, org_id) -> None:
    alice = person(org_id, "alice")
    unreachable = ProviderClient("http://127.0.0.1:1/v1")

    answer = plain(GatewayService(unreachable, wait_ms=0).call(chat(alice, "req_x")))

    assert answer.status == 503
    assert b"service_unavailable" in answer.body
    assert b"127.0.0.1" not in answer.body
    with connection() as conn:
        (logged,) = list_calls(conn, alice).calls
    assert str(logged.call.gateway_request_id) == answer.headers[GATEWAY_REQUEST_ID]
    assert logged.call.status == 503


def test_a_lost_log_line_does_not_fail_the_call(keys, org_id, client, provider) -> None:
    service = GatewayService(client, wait_ms=0, connect=dead_database)

    answer = plain(service.call(chat(person(org_id, "alice"), None)))

    assert_passed_through(answer, provider)


def test_logs_show_own_calls_or_with_audit_read_the_organisations(
    db, keys, org_id, client, provider
) -> None:
    service = GatewayService(client, wait_ms=0)
    for user in ("alice", "alice", "bob"):
        service.call(chat(person(org_id, user), "req_shared"))
    other = new_org(db, "Globex")
    service.call(chat(person(other, "alice", SCOPE_AUDIT_READ), "req_shared"))

    with connection() as conn:
        own = list_calls(conn, person(org_id, "alice"), context_request_id="req_shared")
        audited = list_calls(conn, person(org_id, "dora", SCOPE_AUDIT_READ))
        other_id = list_calls(conn, person(org_id, "alice"), context_request_id="req_other")

    assert [c.call.user_id for c in own.calls] == ["alice", "alice"]
    assert sorted(c.call.user_id for c in audited.calls) == ["alice", "alice", "bob"]
    assert other_id.calls == []


def test_log_pages_follow_the_cursor_without_loss_or_repeat(keys, org_id, client, provider) -> None:
    alice = person(org_id, "alice")
    service = GatewayService(client, wait_ms=0)
    made = [plain(service.call(chat(alice, None))).headers[GATEWAY_REQUEST_ID] for _ in range(5)]

    seen: list[str] = []
    after = None
    with connection() as conn:
        while True:
            page = list_calls(conn, alice, limit=2, after=after)
            seen += [str(c.call.gateway_request_id) for c in page.calls]
            if page.next_position is None:
                break
            after = page.next_position

    assert seen == made[::-1]


def test_nothing_but_the_gateways_own_headers_reaches_the_provider(
    keys, org_id, client, provider
) -> None:
    GatewayService(client, wait_ms=0).call(chat(person(org_id, "alice"), "req_x"))

    (exchange,) = provider.exchanges
    sent = {name.lower() for name in exchange.headers}
    assert sent <= {
        "host",
        "accept",
        "accept-encoding",
        "user-agent",
        "authorization",
        "content-type",
        "content-length",
        "connection",
    }
    assert exchange.headers["Authorization"] == "Bearer sk-provider"
    assert exchange.body == CHAT


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def audit_lines() -> Iterator[list[logging.LogRecord]]:
    """The audit logger's records (the test session logs at WARNING: conftest.py)."""
    captured = Captured()
    audit_logger.addHandler(captured)
    yield captured.records
    audit_logger.removeHandler(captured)


def test_every_link_attempt_is_audited_with_outcome_ids_and_latency(
    keys, org_id, client, provider, audit_lines
) -> None:
    event = retrieval(org_id, keys)
    alice = person(org_id, "alice")
    linked = plain(GatewayService(client, wait_ms=0).call(chat(alice, event.record.request_id)))
    GatewayService(client, wait_ms=0, connect=dead_database).call(chat(alice, "req_down"))
    GatewayService(client, wait_ms=0).call(chat(alice, None))  # no retrieval named: no attempt

    assert [r.getMessage() for r in audit_lines] == [AUDIT_EVENT, AUDIT_EVENT]
    first, second = audit_lines
    assert first.levelno == logging.INFO
    assert first.outcome == "linked"
    assert first.contextRequestId == event.record.request_id
    assert first.gatewayRequestId == linked.headers[GATEWAY_REQUEST_ID]
    assert first.attributionIds == [str(event.record.attribution_id)]
    assert first.orgId == str(org_id)
    assert first.latencyMs >= 0
    assert (second.outcome, second.problem) == ("error", "OperationalError")
