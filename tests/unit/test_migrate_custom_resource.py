"""The DatabaseMigrations custom resource answers CloudFormation on every path.

A stdlib HTTP server on loopback stands in for the pre-signed S3 ``ResponseURL``; the migrations
run against the session's real PostgreSQL.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.error import HTTPError

import psycopg
import pytest

from context_ledger.db import custom_resource
from context_ledger.db.custom_resource import PHYSICAL_RESOURCE_ID, handler
from context_ledger.db.migrate import available_migrations
from context_ledger.local.postgres import ensure_database
from context_ledger.settings import get_settings

ALL_VERSIONS = ",".join(f"{m.version:04d}" for m in available_migrations())


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class ResponseEndpoint:
    url: str
    received: list[Received] = field(default_factory=list)
    status: int = 200
    arrived: threading.Event = field(default_factory=threading.Event)

    def only(self) -> dict[str, Any]:
        assert len(self.received) == 1, self.received
        return self.received[0].body


@pytest.fixture
def endpoint() -> Iterator[ResponseEndpoint]:
    """A loopback server that records PUTs the way S3 accepts a pre-signed upload."""
    state = ResponseEndpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            state.received.append(Received(self.path, dict(self.headers.items()), body))
            state.arrived.set()
            self.send_response(state.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_port}/bucket/stack-response?X-Amz-Signature=abc"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class FakeContext:
    remaining_ms: int = 600_000
    log_group_name: str = "/aws/lambda/context-ledger-MigrateFunction"
    log_stream_name: str = "2025/01/01/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def _event(request_type: str, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "RequestType": request_type,
        "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:migrate",
        "ResponseURL": url,
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/context-ledger/guid",
        "RequestId": f"req-{secrets.token_hex(4)}",
        "LogicalResourceId": "DatabaseMigrations",
        "ResourceType": "Custom::DatabaseMigrations",
        "ResourceProperties": {"Version": "arn:aws:lambda:us-east-1:1:layer:shared:7"},
        **extra,
    }


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Environment changes visible to get_settings(), undone (cache included) afterwards."""
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


@pytest.fixture
def empty_database(pg_server_uri: str) -> Iterator[str]:
    name = f"ctxl_cfn_{secrets.token_hex(4)}"
    url = ensure_database(pg_server_uri, name)
    yield url
    with psycopg.connect(pg_server_uri, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                psycopg.sql.Identifier(name)
            )
        )


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_create_applies_the_migrations_and_answers_success(
    endpoint: ResponseEndpoint, empty_database: str, settings_env: pytest.MonkeyPatch
) -> None:
    settings_env.setenv("DATABASE_URL", empty_database)
    event = _event("Create", endpoint.url)

    handler(event, FakeContext())

    body = endpoint.only()
    assert body["Status"] == "SUCCESS"
    assert body["PhysicalResourceId"] == PHYSICAL_RESOURCE_ID
    assert body["StackId"] == event["StackId"]
    assert body["RequestId"] == event["RequestId"]
    assert body["LogicalResourceId"] == "DatabaseMigrations"
    assert body["Data"]["applied"] == ALL_VERSIONS
    assert ALL_VERSIONS in body["Reason"]
    received = endpoint.received[0]
    assert received.path.startswith("/bucket/stack-response?")
    # The pre-signed URL is signed without a content type: the header must be sent empty.
    assert received.headers.get("Content-Type", received.headers.get("Content-type")) == ""
    with psycopg.connect(empty_database) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert sorted(versions) == [m.version for m in available_migrations()]


def test_update_on_a_migrated_database_applies_nothing(
    endpoint: ResponseEndpoint, database_url: str
) -> None:
    get_settings.cache_clear()  # the session fixture points DATABASE_URL at this database

    handler(_event("Update", endpoint.url, PhysicalResourceId=PHYSICAL_RESOURCE_ID), FakeContext())

    body = endpoint.only()
    assert body["Status"] == "SUCCESS"
    assert body["PhysicalResourceId"] == PHYSICAL_RESOURCE_ID
    assert body["Data"] == {"applied": "", "latest": ALL_VERSIONS.rsplit(",", 1)[-1]}
    assert "up to date" in body["Reason"]


def test_delete_never_touches_the_database(
    endpoint: ResponseEndpoint, settings_env: pytest.MonkeyPatch
) -> None:
    # Unreachable on purpose: Delete must answer without connecting.
    settings_env.setenv("DATABASE_URL", f"postgresql://u:p@127.0.0.1:{_closed_port()}/db")

    handler(_event("Delete", endpoint.url, PhysicalResourceId=PHYSICAL_RESOURCE_ID), FakeContext())

    body = endpoint.only()
    assert body["Status"] == "SUCCESS"
    assert body["PhysicalResourceId"] == PHYSICAL_RESOURCE_ID


def test_unreachable_database_answers_failed_without_leaking_the_url(
    endpoint: ResponseEndpoint, settings_env: pytest.MonkeyPatch
) -> None:
    port = _closed_port()
    settings_env.setenv(
        "DATABASE_URL", f"postgresql://ledger_admin:Sup3rS3cretPw@127.0.0.1:{port}/context_ledger"
    )
    context = FakeContext()

    handler(_event("Create", endpoint.url), context)

    body = endpoint.only()
    assert body["Status"] == "FAILED"
    assert body["PhysicalResourceId"] == PHYSICAL_RESOURCE_ID
    reason = body["Reason"]
    assert "could not connect to the database" in reason
    assert context.log_stream_name in reason
    for leaked in ("Sup3rS3cretPw", "ledger_admin", "postgresql://", "127.0.0.1", str(port)):
        assert leaked not in reason
    assert len(json.dumps(body)) < 4096


def test_invalid_settings_answer_failed_naming_the_variable(
    endpoint: ResponseEndpoint, settings_env: pytest.MonkeyPatch
) -> None:
    settings_env.setenv("KEYSTONE_CONTEXT_SEARCH_BACKEND", "bogus")

    handler(_event("Update", endpoint.url), FakeContext())

    body = endpoint.only()
    assert body["Status"] == "FAILED"
    assert "KEYSTONE_CONTEXT_SEARCH_BACKEND" in body["Reason"]
    assert "bogus" not in body["Reason"]


def test_answers_failed_before_the_invocation_deadline(
    endpoint: ResponseEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def stuck() -> dict[str, str]:
        release.wait(10)
        return {"applied": "", "latest": ""}

    monkeypatch.setattr(custom_resource, "_apply_migrations", stuck)
    context = FakeContext(remaining_ms=int((custom_resource.DEADLINE_MARGIN_SECONDS + 0.2) * 1000))
    worker = threading.Thread(target=handler, args=(_event("Create", endpoint.url), context))
    worker.start()
    try:
        assert endpoint.arrived.wait(5), "no response before the deadline"
        body = endpoint.only()
        assert body["Status"] == "FAILED"
        assert "timed out" in body["Reason"]
    finally:
        release.set()
        worker.join(10)
    assert len(endpoint.received) == 1  # the late result is not sent a second time


def test_a_failed_response_upload_raises_so_lambda_retries(endpoint: ResponseEndpoint) -> None:
    endpoint.status = 500

    with pytest.raises(HTTPError):
        handler(_event("Delete", endpoint.url), FakeContext())


def test_an_event_without_response_url_is_ignored() -> None:
    handler({"RequestType": "Create"}, FakeContext())
