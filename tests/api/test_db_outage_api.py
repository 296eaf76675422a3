"""A database restart under the running service: requests during the outage answer ``503
service_unavailable`` in the standard error body (never a 500, never a stack trace), within the
pool's checkout timeout, and the service answers again by itself once the server is back.

The runtime here has a PostgreSQL server of its own, so stopping it does not touch the session's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from api_support import TEMPLATE, bearer, runtime_env

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection
from context_ledger.db.migrate import migrate
from context_ledger.local.postgres import (
    ensure_database,
    start_embedded_again,
    stop_embedded,
)
from context_ledger.local.runtime import LocalRuntime
from context_ledger.spaces.service import create_organisation

SPACES = "/api/v1/context/spaces"
POOL_TIMEOUT_SECONDS = 1.5


@pytest.fixture(scope="module")
def outage_runtime(own_server, sqs_endpoint, local_keys) -> Iterator[LocalRuntime]:
    url = ensure_database(own_server.get_uri(), "api_outage")
    migrate(url)
    env = runtime_env(
        url,
        local_keys,
        KEYSTONE_DB_POOL_TIMEOUT_SECONDS=str(POOL_TIMEOUT_SECONDS),
        KEYSTONE_DB_POOL_MAX="2",
    )
    with LocalRuntime(TEMPLATE, port=0, env=env, sqs_endpoint=sqs_endpoint) as running:
        yield running


@pytest.fixture
def admin(outage_runtime, token) -> dict[str, str]:
    with connection() as conn:
        org = create_organisation(conn, name="Outage")
    return bearer(token(org, "root", SCOPE_CONTEXT_ADMIN))


#: A route counted by the app-wide dependency, and the retrieve route, which sends its count
#: with its first round trip (http/ratelimit.py).
ROUTES = {
    "spaces": ("GET", SPACES, None),
    "retrieve": ("POST", "/api/v1/context/retrieve", {"query": "refunds"}),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_restart_answers_503_during_the_outage_and_200_after(
    outage_runtime: LocalRuntime, own_server: object, admin: dict[str, str], route: str
) -> None:
    method, path, body = ROUTES[route]
    with httpx.Client(base_url=outage_runtime.url, timeout=60) as http:
        assert http.request(method, path, headers=admin, json=body).status_code == 200
        stop_embedded(own_server)
        try:
            started = time.monotonic()
            down = http.request(method, path, headers=admin, json=body)
            elapsed = time.monotonic() - started
        finally:
            start_embedded_again(own_server)
        back = http.request(method, path, headers=admin, json=body)

    assert down.status_code == 503
    assert down.json() == {
        "error": {
            "code": "service_unavailable",
            "message": "the database is unavailable; retry shortly",
        }
    }
    # One checkout timeout, not two: psycopg_pool's default is 30 s per checkout, and a request
    # the database failed is not counted afterwards (that would wait for the pool again).
    assert elapsed < POOL_TIMEOUT_SECONDS * 1.9
    assert back.status_code == 200, back.text
