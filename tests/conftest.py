"""Test session fixtures: one real PostgreSQL (embedded, with pgvector) and one moto SQS server.

Set ``DATABASE_URL`` to run against another PostgreSQL instead; each session then creates and drops
its own database on it, so a developer's data is never touched.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

# The tests configure the service through the environment, exactly as Lambda does. These are set
# before any context_ledger module reads its settings.
os.environ.setdefault("KEYSTONE_ENVIRONMENT", "local")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "context-ledger-tests")

from context_ledger.local.template import read_template

# The functions run at the template's log level (INFO), never a quieter one: a log call that
# raises only when its level is enabled (the writer's ``created=`` did, at INFO) must fail here.
# Set before any logger is made, so every module's logger sees it.
os.environ["POWERTOOLS_LOG_LEVEL"] = read_template(
    Path(__file__).resolve().parents[1] / "template.yaml"
).resolver.parameters["LogLevel"]

from api_support import TEMPLATE, empty_database, runtime_env

from context_ledger.auth.local_keys import LocalKeys, ensure_local_keys
from context_ledger.db import close_pool
from context_ledger.db.migrate import migrate
from context_ledger.local.postgres import ensure_database, start_embedded
from context_ledger.local.runtime import LocalRuntime
from context_ledger.settings import get_settings


@pytest.fixture(scope="session")
def pg_server_uri() -> Iterator[str]:
    """A PostgreSQL server: DATABASE_URL if given, else an embedded one in a temp directory."""
    external = os.environ.get("DATABASE_URL")
    if external:
        yield external
        return
    tmp = Path(tempfile.mkdtemp(prefix="ctxl-test-pg-"))
    server = start_embedded(tmp / "pgdata")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """An embedded PostgreSQL of the test module's own, for tests that stop and restart it
    (the session's server is shared by every other test)."""
    handle = start_embedded(Path(tmp_path_factory.mktemp("own-pg")) / "pgdata")
    try:
        yield handle
    finally:
        handle.cleanup()


@pytest.fixture(scope="session")
def database_url(pg_server_uri: str) -> Iterator[str]:
    """A fresh, migrated database for this session; DATABASE_URL points at it."""
    name = f"ctxl_test_{secrets.token_hex(4)}"
    url = ensure_database(pg_server_uri, name)
    migrate(url)
    previous = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = url
    get_settings.cache_clear()
    try:
        yield url
    finally:
        close_pool()
        if previous is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous
        get_settings.cache_clear()
        with psycopg.connect(pg_server_uri, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )


@pytest.fixture
def db(database_url: str) -> Iterator[str]:
    """A migrated database emptied after the test (every table but schema_migrations)."""
    yield database_url
    empty_database(database_url)


@pytest.fixture(scope="session")
def sqs_endpoint() -> Iterator[str]:
    """moto's SQS server on loopback; boto3 reaches it through AWS_ENDPOINT_URL_SQS."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    previous = os.environ.get("AWS_ENDPOINT_URL_SQS")
    os.environ["AWS_ENDPOINT_URL_SQS"] = endpoint
    try:
        yield endpoint
    finally:
        server.stop()
        if previous is None:
            os.environ.pop("AWS_ENDPOINT_URL_SQS", None)
        else:
            os.environ["AWS_ENDPOINT_URL_SQS"] = previous


@pytest.fixture(scope="session")
def local_keys(tmp_path_factory: pytest.TempPathFactory) -> LocalKeys:
    """The session's signing keys and JWKS file (tokens in every suite are signed with them)."""
    return ensure_local_keys(tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="session")
def runtime(database_url: str, sqs_endpoint: str, local_keys: LocalKeys) -> Iterator[LocalRuntime]:
    """The local runtime over the test database: template.yaml served on loopback.

    One per session for the API and security suites: all functions share this process's
    environment, so a second runtime with other keys would confuse the first one's authorizer.
    """
    env = runtime_env(database_url, local_keys)
    # The minutely chain sweep would checkpoint chains between a test's steps: schedules fire
    # on demand here (runtime.fire), as the schedule tests do.
    with LocalRuntime(
        TEMPLATE, port=0, env=env, sqs_endpoint=sqs_endpoint, timed_schedules=False
    ) as running:
        yield running
