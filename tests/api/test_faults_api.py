"""Dependencies failing under the running service: fast, clear answers and recovery.

- SQS unreachable: a retrieval answers ``503 context.attribution.failed`` with no chunks (no
  context without evidence), within the publisher's short timeouts, and succeeds once it is back.
- The embeddings endpoint slow or failing: memory ``/relevant`` answers ``503
  service_unavailable`` within ``KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS`` (the spec
  promises the same answer for the same store and query, so it does not degrade), and answers
  again once the endpoint does. The stand-in's ``go_down`` (the fault benchmark's "refused")
  really takes it down: kept-alive connections too.

The database outage is in tests/integration/test_db_outage.py (a server of its own).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from api_support import TEMPLATE, bearer, error_of, runtime_env

from context_ledger.attribution import publisher
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.embeddings.client import EmbeddingsClient, EmbeddingsUnavailableError
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.local.runtime import LocalRuntime

SPACES = "/api/v1/context/spaces"
SOURCES = "/api/v1/context/sources"
RETRIEVE = "/api/v1/context/retrieve"
MEMORY = "/api/context/fault-memories"
QUERY_TIMEOUT_SECONDS = 1.0


def dead_endpoint() -> str:
    """A loopback URL nothing listens on (connections are refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def project(api: httpx.Client, admin_headers: dict[str, str]) -> str:
    space = api.post(SPACES, headers=admin_headers, json={"name": "Ops", "level": "project"})
    space_id = space.json()["id"]
    source = api.post(
        f"{SPACES}/{space_id}/sources", headers=admin_headers, json={"kind": "docs", "name": "ops"}
    ).json()["id"]
    documents = [{"path": "runbook.md", "content": "Restart the queue consumer after a failover."}]
    indexed = api.put(
        f"{SOURCES}/{source}/index", headers=admin_headers, json={"documents": documents}
    )
    assert indexed.status_code == 200, indexed.text
    return space_id


@pytest.fixture
def fresh_sqs_client() -> Iterator[None]:
    """The publisher's cached client is made again from the environment after the test."""
    yield
    publisher._sqs.cache_clear()


def test_the_publisher_does_not_wait_on_boto3s_defaults() -> None:
    config = publisher._sqs().meta.config
    assert (config.connect_timeout, config.read_timeout) == (
        publisher.CONNECT_TIMEOUT_SECONDS,
        publisher.READ_TIMEOUT_SECONDS,
    )
    assert config.retries == {"total_max_attempts": publisher.MAX_ATTEMPTS, "mode": "standard"}


def test_with_sqs_unreachable_a_retrieval_is_503_with_no_chunks_then_succeeds_again(
    api: httpx.Client,
    admin_headers: dict[str, str],
    project: str,
    monkeypatch: pytest.MonkeyPatch,
    fresh_sqs_client: None,
) -> None:
    body = {"query": "restart after failover", "spaceId": project}
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", dead_endpoint())
    publisher._sqs.cache_clear()
    started = time.monotonic()
    refused = api.post(RETRIEVE, headers=admin_headers, json=body)
    elapsed = time.monotonic() - started

    assert error_of(refused) == (503, "context.attribution.failed")
    assert "chunks" not in refused.json()
    worst_case = publisher.MAX_ATTEMPTS * (
        publisher.CONNECT_TIMEOUT_SECONDS + publisher.READ_TIMEOUT_SECONDS
    )
    assert elapsed < worst_case * 3  # boto3's defaults: 60 s to connect, retried

    monkeypatch.undo()
    publisher._sqs.cache_clear()
    back = api.post(RETRIEVE, headers=admin_headers, json=body)
    assert back.status_code == 200, back.text
    assert back.json()["chunks"]


# --- the embeddings endpoint and /relevant -------------------------------------------------------


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 32) as running:
        yield running


@pytest.fixture(scope="module")
def memory_runtime(database_url, sqs_endpoint, local_keys, stand_in) -> Iterator[LocalRuntime]:
    env = runtime_env(
        database_url,
        local_keys,
        KEYSTONE_CONTEXT_EMBEDDINGS_URL=stand_in.url,
        KEYSTONE_CONTEXT_EMBEDDINGS_MODEL="stand-in",
        KEYSTONE_CONTEXT_EMBEDDINGS_QUERY_TIMEOUT_SECONDS=str(QUERY_TIMEOUT_SECONDS),
    )
    with LocalRuntime(TEMPLATE, port=0, env=env, sqs_endpoint=sqs_endpoint) as running:
        yield running


@pytest.fixture
def memories(memory_runtime, db, stand_in, org, token) -> Iterator[tuple[httpx.Client, dict]]:
    stand_in.reset()
    admin = bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))
    with httpx.Client(base_url=memory_runtime.url, timeout=60) as http:
        stored = http.post(
            MEMORY, headers=admin, json={"content": "Deploys freeze on Fridays.", "type": "fact"}
        )
        assert stored.status_code == 201, stored.text
        yield http, admin
    stand_in.reset()


@pytest.mark.parametrize("fault", ["slow", "failing"])
def test_relevant_answers_503_within_the_query_timeout_then_recovers(
    memories: tuple[httpx.Client, dict], stand_in: StandInEmbeddingsServer, fault: str
) -> None:
    http, admin = memories
    relevant = f"{MEMORY}/relevant?query=when+do+deploys+freeze"
    if fault == "slow":
        stand_in.delay = QUERY_TIMEOUT_SECONDS * 3
    else:
        stand_in.fail_next(503, times=100)
    started = time.monotonic()
    down = http.get(relevant, headers=admin)
    elapsed = time.monotonic() - started
    stand_in.reset()

    assert error_of(down) == (503, "service_unavailable")
    assert "memories" not in down.json()
    # Without the query timeout: 3 attempts x KEYSTONE_CONTEXT_EMBEDDINGS_TIMEOUT_SECONDS (30 s).
    assert elapsed < QUERY_TIMEOUT_SECONDS * 10
    back = http.get(relevant, headers=admin)
    assert back.status_code == 200, back.text
    assert back.json()["memories"][0]["similarity"] > 0


def test_a_stand_in_gone_down_drops_kept_alive_connections_and_refuses_new_ones() -> None:
    sleeps: list[float] = []
    with serve_embeddings(0, 8) as stand_in:
        client = EmbeddingsClient(stand_in.url, "stand-in", sleep=sleeps.append)
        assert len(client.embed(["warm"])[0]) == 8  # a kept-alive connection now
        stand_in.go_down()
        with pytest.raises(EmbeddingsUnavailableError, match="after 3 attempts"):
            client.embed(["down"])
        client.close()
    assert len(sleeps) == 2  # every attempt failed: the kept-alive one and two new ones
