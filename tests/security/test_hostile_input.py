"""Hostile input through the local runtime: each a clear 4xx in the documented error body, never
a 500 or a crash. Oversized bodies (each function's limit, and API Gateway's 10 MB), huge
``limit``/``tokenBudget``/``maxPerLevel`` values (lowered, as docs/api.md says), deeply nested
JSON, invalid UTF-8 in bodies, query strings and paths, and headers over their limits.

Requests httpx would encode or refuse to build (raw bytes in the request target, a header line
over the server's limit) go over a plain socket.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest
from security_support import MEMORY_PROJECT, World

from context_ledger.http.api import max_body_bytes
from context_ledger.local.runtime import LocalRuntime
from context_ledger.local.server import MAX_BODY_BYTES as GATEWAY_MAX_BODY_BYTES

RETRIEVE = "/api/v1/context/retrieve"
EMBEDDINGS = "/api/v1/embeddings"
CHAT = "/api/v1/models/chat/completions"

#: One body-taking route per function (``{placeholders}`` are the world's ids).
BODY_ROUTES = {
    "spaces": ("POST", "/api/v1/context/spaces"),
    "sources": ("PUT", "/api/v1/context/sources/{source}/index"),
    "retrieve": ("POST", RETRIEVE),
    "attributions": ("POST", "/api/v1/context/attributions/{attribution}/links"),
    "context_admin": ("PUT", "/api/v1/context/weights"),
    "memory": ("POST", f"/api/context/{MEMORY_PROJECT}"),
    "model_gateway": ("POST", CHAT),
    "embeddings": ("POST", EMBEDDINGS),
}

HUGE = 10**30
INVALID_UTF8 = b"\xff\xfe\xc3\x28"


def _admin(world: World) -> dict[str, str]:
    return world.callers["context_admin"]


def _error(response: httpx.Response) -> tuple[int, str | None]:
    """The status and the error body's code (OpenAI's body on /api/v1/embeddings: its type)."""
    error = response.json()["error"]
    assert isinstance(error["message"], str)
    if response.request.url.path == EMBEDDINGS:
        return response.status_code, error.get("code") or error["type"]
    return response.status_code, error["code"]


def _send_json_bytes(
    api: httpx.Client, world: World, method: str, path: str, body: bytes
) -> httpx.Response:
    # The embeddings endpoint reads bodies of services only (a person is 403 before that).
    caller = world.callers["service"] if path == EMBEDDINGS else _admin(world)
    headers = {**caller, "content-type": "application/json"}
    return api.request(method, path.format_map(world.ids), content=body, headers=headers)


def _raw(runtime: LocalRuntime, request: bytes) -> tuple[int, bytes]:
    """Send ``request`` as it is; the answer's status and body."""
    address = urlsplit(runtime.url)
    host, port = address.hostname, address.port
    assert host is not None
    assert port is not None
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(request)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _raw_get(runtime: LocalRuntime, target: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    lines = [b"GET " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    lines += [f"{name}: {value}".encode("latin-1") for name, value in headers.items()]
    return _raw(runtime, b"\r\n".join(lines) + b"\r\n\r\n")


# --- Oversized bodies ---------------------------------------------------------------------


@pytest.mark.parametrize("function", sorted(BODY_ROUTES))
def test_a_body_over_the_functions_limit_is_413(
    function: str, api: httpx.Client, world: World
) -> None:
    method, path = BODY_ROUTES[function]
    body = b'{"padding": "' + b"x" * max_body_bytes(function) + b'"}'

    response = _send_json_bytes(api, world, method, path, body)

    assert _error(response) == (413, "payload_too_large"), response.text[:300]


def test_a_body_over_api_gateways_10_mb_is_refused_before_any_function(
    api: httpx.Client, world: World
) -> None:
    body = b"x" * (GATEWAY_MAX_BODY_BYTES + 1)

    response = _send_json_bytes(api, world, "POST", RETRIEVE, body)

    assert response.status_code == 413
    assert response.json() == {"message": "Request Entity Too Large"}


# --- Huge numbers ---------------------------------------------------------------------------


def test_huge_retrieve_budgets_are_lowered(api: httpx.Client, world: World) -> None:
    body = {"query": "refund approvals", "tokenBudget": HUGE, "maxPerLevel": HUGE}

    response = api.post(RETRIEVE, json=body, headers=_admin(world))

    assert response.status_code == 200, response.text
    assert response.json()["tokensUsed"] <= 32000


@pytest.mark.parametrize(
    ("path", "query", "listed"),
    [
        (f"/api/context/{MEMORY_PROJECT}", {"limit": HUGE}, "memories"),
        (f"/api/context/{MEMORY_PROJECT}/relevant", {"limit": HUGE}, "memories"),
        (f"/api/context/{MEMORY_PROJECT}/relevant", {"token_budget": HUGE}, "memories"),
        ("/api/v1/observability/compliance-evidence", {"limit": HUGE}, "records"),
        ("/api/v1/models/logs", {"limit": HUGE}, "calls"),
    ],
)
def test_huge_limits_are_lowered(
    path: str, query: dict[str, int], listed: str, api: httpx.Client, world: World
) -> None:
    response = api.get(path, params=query, headers=_admin(world))

    assert response.status_code == 200, response.text
    assert isinstance(response.json()[listed], list)


def test_a_huge_memory_offset_is_422(api: httpx.Client, world: World) -> None:
    path = f"/api/context/{MEMORY_PROJECT}"

    response = api.get(path, params={"offset": HUGE}, headers=_admin(world))

    assert _error(response) == (422, "validation_failed")


# --- Deeply nested JSON ---------------------------------------------------------------------


@pytest.mark.parametrize("function", sorted(BODY_ROUTES))
@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_deeply_nested_json_is_refused(
    function: str, depth: int, api: httpx.Client, world: World
) -> None:
    method, path = BODY_ROUTES[function]
    nested = b'{"a": ' + b"[" * depth + b"]" * depth + b"}"

    response = _send_json_bytes(api, world, method, path, nested)

    assert response.status_code in (400, 422), response.text[:300]
    assert _error(response)[1] is not None


# --- Invalid UTF-8 ----------------------------------------------------------------------------


@pytest.mark.parametrize("function", sorted(BODY_ROUTES))
def test_invalid_utf8_in_a_body_is_refused(function: str, api: httpx.Client, world: World) -> None:
    method, path = BODY_ROUTES[function]
    body = b'{"query": "' + INVALID_UTF8 + b'", "content": "' + INVALID_UTF8 + b'"}'

    response = _send_json_bytes(api, world, method, path, body)

    assert response.status_code in (400, 422), response.text[:300]
    assert _error(response)[1] is not None


@pytest.mark.parametrize(
    "target",
    [
        f"/api/context/{MEMORY_PROJECT}?q=%FF%FE%C3%28".encode(),
        f"/api/context/{MEMORY_PROJECT}/relevant?query=%FF%FE".encode(),
        b"/api/v1/observability/compliance-evidence?subjectUser=%FF%FE",
        b"/api/v1/models/logs?cursor=%FF%FE",
        b"/api/context/%FF%FE",
        b"/api/v1/context/spaces/%FF%FE",
        b"/api/v1/context/attribution/%FF%FE",
        f"/api/context/{MEMORY_PROJECT}?q=".encode() + INVALID_UTF8,
        b"/api/context/" + INVALID_UTF8,
    ],
)
def test_invalid_utf8_in_paths_and_query_strings_is_a_4xx(
    target: bytes, runtime: LocalRuntime, world: World
) -> None:
    status, body = _raw_get(runtime, target, _admin(world))

    assert 400 <= status < 500, body[:300]


@pytest.mark.parametrize("text", ["a\u0000b", "\ud800"], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("POST", "/api/v1/context/spaces", "name"),
        ("POST", RETRIEVE, "lensId"),
        ("POST", f"/api/context/{MEMORY_PROJECT}", "content"),
    ],
)
def test_text_postgresql_cannot_store_is_422(
    text: str, method: str, path: str, field: str, api: httpx.Client, world: World
) -> None:
    body = {"name": "Ops", "level": "team", "query": "refunds", "content": "ok", field: text}
    if path != "/api/v1/context/spaces":
        body = {k: v for k, v in body.items() if k not in ("name", "level")}
    if path != RETRIEVE:
        body.pop("query", None)

    # json.dumps escapes both (as \u0000 and \ud800), which is valid JSON.
    response = _send_json_bytes(api, world, method, path, json.dumps(body).encode())

    assert _error(response) == (422, "validation_failed"), response.text[:300]


@pytest.mark.parametrize(
    "target",
    [f"/api/context/{MEMORY_PROJECT}?q=%00".encode(), b"/api/context/%00"],
)
def test_nul_in_paths_and_query_strings_is_400(
    target: bytes, runtime: LocalRuntime, world: World
) -> None:
    status, body = _raw_get(runtime, target, _admin(world))

    assert status == 400, body[:300]


# --- Headers over their limits -----------------------------------------------------------------


def test_a_long_authorization_header_is_401(api: httpx.Client) -> None:
    response = api.get(
        "/api/v1/context/spaces", headers={"authorization": "Bearer " + "a" * 60_000}
    )

    assert response.status_code == 401, response.text[:300]


def test_a_long_api_key_is_401(api: httpx.Client) -> None:
    headers = {"authorization": "Bearer ctxl_" + "a" * 60_000}

    response = api.get("/api/v1/context/spaces", headers=headers)

    assert response.status_code == 401, response.text[:300]


def test_a_long_client_header_is_dropped_as_malformed(api: httpx.Client, world: World) -> None:
    """docs/api.md: a malformed X-Keystone-Client is dropped, not refused. (API Gateway itself
    refuses request lines and headers over 10 KB together; the local runtime does not.)"""
    headers = {**_admin(world), "x-keystone-client": "c" * 60_000}

    response = api.post(RETRIEVE, json={"query": "refunds"}, headers=headers)

    assert response.status_code == 200, response.text[:300]


@pytest.mark.parametrize(
    "metadata",
    ['{"note": "' + "m" * 60_000 + '"}', "[" * 2000 + "]" * 2000],
    ids=["long", "nested"],
)
def test_long_or_deep_metadata_is_refused(metadata: str, api: httpx.Client, world: World) -> None:
    headers = {**_admin(world), "x-keystone-metadata": metadata}
    body = {"model": "echo-1", "messages": [{"role": "user", "content": "hi"}]}

    response = api.post(CHAT, json=body, headers=headers)

    assert _error(response)[0] == 400, response.text[:300]


def test_a_header_line_over_the_servers_limit_is_431(runtime: LocalRuntime, world: World) -> None:
    """The runtime's HTTP server refuses a header line over 64 KiB itself (API Gateway's own
    limit, 10 KB for the request line and headers together, is lower; see docs/development.md)."""
    headers = {**_admin(world), "x-keystone-client": "c" * 70_000}

    status, _ = _raw_get(runtime, b"/api/v1/context/spaces", headers)

    assert status == 431
