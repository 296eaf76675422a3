"""The bootstrap action of MigrateFunction against a real, migrated, empty PostgreSQL: the first
organisation and its administrator's key once, never a second time, never a key in the logs."""

from __future__ import annotations

import logging
import secrets
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from context_ledger.auth.api_keys import principal_for_api_key
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, AuthMethod, PrincipalKind
from context_ledger.bootstrap.handler import handler
from context_ledger.db.migrate import migrate
from context_ledger.local.postgres import ensure_database
from context_ledger.settings import get_settings


class Context:
    """What the handler reads of Lambda's context: nothing; it is passed on as Lambda does."""


def _event(**fields: Any) -> dict[str, Any]:
    return {"action": "bootstrap", "organisation": "Acme", "adminUser": "alice", **fields}


@pytest.fixture
def fresh_db(pg_server_uri: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A migrated database of this test's own, holding no organisation; DATABASE_URL names it."""
    name = f"ctxl_boot_{secrets.token_hex(4)}"
    url = ensure_database(pg_server_uri, name)
    migrate(url)
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()
    with psycopg.connect(pg_server_uri, autocommit=True) as conn:
        conn.execute(
            psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                psycopg.sql.Identifier(name)
            )
        )


def _counts(url: str) -> tuple[int, int, int]:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM organisations), (SELECT count(*) FROM spaces),"
            " (SELECT count(*) FROM api_keys)"
        ).fetchone()
    assert row is not None
    return row


def _principal(url: str, key: str):
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
        return principal_for_api_key(conn, key)


def test_the_first_bootstrap_creates_the_organisation_and_an_admin_key(fresh_db: str) -> None:
    answer = handler(_event(), Context())

    assert answer["status"] == "created"
    assert answer["adminUser"] == "alice"
    assert "embeddingsApiKey" not in answer
    principal = _principal(fresh_db, answer["adminApiKey"])
    assert principal is not None
    assert str(principal.org_id) == answer["organisationId"]
    assert principal.user_id == "alice"
    assert principal.scopes == frozenset({SCOPE_CONTEXT_ADMIN})
    assert principal.kind is PrincipalKind.PERSON
    assert principal.auth_method is AuthMethod.API_KEY
    expires = datetime.fromisoformat(answer["adminApiKeyExpiresAt"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=30))) < timedelta(minutes=5)
    with psycopg.connect(fresh_db) as conn:
        space = conn.execute(
            "SELECT org_id::text, level, name FROM spaces WHERE id = %s",
            (answer["organisationSpaceId"],),
        ).fetchone()
    assert space == (answer["organisationId"], "organisation", "Acme")
    assert _counts(fresh_db) == (1, 1, 1)


def test_the_admin_key_lives_as_many_days_as_asked(fresh_db: str) -> None:
    answer = handler(_event(adminKeyDays=365), Context())

    expires = datetime.fromisoformat(answer["adminApiKeyExpiresAt"])
    assert abs(expires - (datetime.now(UTC) + timedelta(days=365))) < timedelta(minutes=5)


def test_an_embeddings_key_is_a_service_key_of_the_organisation(fresh_db: str) -> None:
    answer = handler(_event(embeddingsKey=True), Context())

    principal = _principal(fresh_db, answer["embeddingsApiKey"])
    assert principal is not None
    assert str(principal.org_id) == answer["organisationId"]
    assert principal.kind is PrincipalKind.SERVICE
    assert principal.scopes == frozenset()
    assert answer["embeddingsApiKey"] != answer["adminApiKey"]
    assert _counts(fresh_db) == (1, 1, 2)


def test_a_second_bootstrap_is_refused_and_creates_nothing(fresh_db: str) -> None:
    first = handler(_event(), Context())

    again = _event(organisation="Globex", adminUser="mallory", embeddingsKey=True)
    second = handler(again, Context())

    assert second["status"] == "refused"
    assert second["organisationId"] == first["organisationId"]
    assert "Acme" in second["message"]
    assert "nothing was created" in second["message"]
    assert not {"adminApiKey", "embeddingsApiKey"} & set(second)
    assert _counts(fresh_db) == (1, 1, 1)


def test_a_database_holding_any_organisation_is_never_bootstrapped(fresh_db: str) -> None:
    with psycopg.connect(fresh_db) as conn:
        conn.execute("INSERT INTO organisations (name) VALUES ('made by the CLI')")

    assert handler(_event(), Context())["status"] == "refused"
    assert _counts(fresh_db) == (1, 0, 0)


def test_bootstraps_at_once_create_one_organisation(fresh_db: str) -> None:
    start = threading.Barrier(4)
    answers: list[dict[str, Any]] = []

    def run(user: str) -> None:
        start.wait()
        answers.append(handler(_event(adminUser=user), Context()))

    threads = [threading.Thread(target=run, args=(f"admin{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(a["status"] for a in answers) == ["created", "refused", "refused", "refused"]
    assert _counts(fresh_db) == (1, 1, 1)


@pytest.mark.parametrize(
    ("event", "named"),
    [
        ("bootstrap", "JSON object"),
        ({"action": "bootstrap"}, '"organisation"'),
        ({"action": "migrate", "organisation": "Acme", "adminUser": "a"}, '"action"'),
        (_event(organisation="  "), '"organisation"'),
        (_event(organisation="x" * 201), '"organisation"'),
        (_event(adminUser=""), '"adminUser"'),
        (_event(adminUser="alice smith"), '"adminUser"'),
        (_event(adminUser="alice\nbob"), '"adminUser"'),
        (_event(adminUser=7), '"adminUser"'),
        (_event(adminKeyDays=0), '"adminKeyDays"'),
        (_event(adminKeyDays=3651), '"adminKeyDays"'),
        (_event(adminKeyDays=True), '"adminKeyDays"'),
        (_event(adminKeyDays="30"), '"adminKeyDays"'),
        (_event(embeddingsKey="yes"), '"embeddingsKey"'),
        (_event(adminkey=True), "adminkey"),
    ],
)
def test_an_invalid_request_names_its_fault_and_creates_nothing(
    fresh_db: str, event: Any, named: str
) -> None:
    answer = handler(event, Context())

    assert answer["status"] == "invalid"
    assert named in answer["message"]
    assert _counts(fresh_db) == (0, 0, 0)


def test_the_keys_are_never_logged(
    fresh_db: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    created = handler(_event(embeddingsKey=True), Context())
    refused = handler(_event(), Context())

    logged = capsys.readouterr()
    # Each record whole: the structured fields (extra=...) are its attributes.
    text = logged.out + logged.err + "\n".join(str(vars(r)) for r in caplog.records)
    assert "bootstrap done" in text  # the log was captured
    assert "bootstrap refused" in text
    assert refused["status"] == "refused"
    for key in (created["adminApiKey"], created["embeddingsApiKey"]):
        assert key not in text
        assert key.removeprefix("ctxl_")[:16] not in text


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_database_fails_without_naming_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    port = _closed_port()
    monkeypatch.setenv(
        "DATABASE_URL", f"postgresql://ledger_admin:Sup3rS3cretPw@127.0.0.1:{port}/x"
    )
    get_settings.cache_clear()
    try:
        answer = handler(_event(), Context())
    finally:
        get_settings.cache_clear()

    assert answer == {
        "status": "failed",
        "message": "could not connect to the database (OperationalError)",
    }
    logged = "\n".join(str(vars(r)) for r in caplog.records)
    assert "bootstrap failed" in logged  # with the traceback, for the operator's log
    assert "Sup3rS3cretPw" not in logged
