"""The MCP server driven by the MCP SDK's own client over both transports, against the real local
stack: stdio (``context-ledger mcp`` as an agent starts it) and streamable HTTP (``/mcp`` on the
local API Gateway, behind the authorizer, McpFunction calling the API back at the runtime's own
URL). Every tool call is a real API request with the caller's credential."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from api_support import bearer, clean_env, free_port, run_coroutine
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from context_ledger import __version__
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.errors import UNSHOWN_NAME
from context_ledger.local.dev_url import write_dev_url
from context_ledger.mcp.http_app import MAX_BODY_BYTES, PROTOCOL_REFUSALS
from context_ledger.settings import get_settings
from context_ledger_client import ContextLedger

CL = str(Path(sys.executable).parent / "context-ledger")
TOOLS = {"retrieve_context", "search_memories", "add_memory", "link_response"}
CODE = '''def authorise_refund(order, amount):
    """A refund is authorised when the amount is at most what was paid."""
    return amount <= order.paid and check_fraud(order)


def check_fraud(order):
    return order.score < 0.8
'''

Session = Callable[[str], Any]  # token -> async context manager of an initialised ClientSession


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def connect(transport: str, runtime, tmp_path: Path) -> Session:
    """``connect(token)``: an initialised SDK client session over the test's transport."""
    if transport == "http":
        return lambda token: http_session(runtime.url, token)
    return lambda token: stdio_session(runtime.url, token, tmp_path)


@asynccontextmanager
async def stdio_session(
    url: str | None, token: str | None, home: Path, **env: str
) -> AsyncIterator[ClientSession]:
    """``context-ledger mcp`` started as an agent's configuration starts it."""
    args = ["mcp", *(["--url", url] if url else []), *(["--token", token] if token else [])]
    params = StdioServerParameters(command=CL, args=args, env=clean_env(home, **env))
    with (home / "mcp-stderr.log").open("a") as log:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


@asynccontextmanager
async def http_session(
    url: str, token: str, hooks: dict[str, list[Any]] | None = None
) -> AsyncIterator[ClientSession]:
    """The SDK's streamable HTTP client at ``/mcp`` with the bearer credential."""
    async with (
        httpx2.AsyncClient(headers=bearer(token), timeout=60, event_hooks=hooks) as client,
        streamable_http_client(f"{url}/mcp", http_client=client) as streams,
        ClientSession(*streams) as session,
    ):
        await session.initialize()
        yield session


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    return run_coroutine(coroutine)


async def call(connect: Session, token: str, tool: str, **arguments: Any) -> CallToolResult:
    async with connect(token) as session:
        return await session.call_tool(tool, arguments)


def text(result: CallToolResult) -> str:
    [block] = result.content
    assert block.type == "text"
    return block.text


@pytest.fixture
def world(runtime, org, token, tmp_path: Path) -> dict[str, str]:
    """A team with a project holding an indexed codebase, alice allowed to search the team."""
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "refunds.py").write_text(CODE)
    with ContextLedger(runtime.url, admin) as cl:
        team = cl.create_space("Payments", level="team")
        project = cl.create_space("Billing", level="project", parent_id=team.id)
        cl.grant(team.id, "user:alice", ["context:space:search"])
        source = cl.create_source(project.id, "billing code", kind="codebase")
        cl.index_folder(source.id, folder)
    return {
        "admin": admin,
        "alice": token(org, "alice"),
        "mallory": token(org, "mallory"),
        "team": team.id,
        "project": project.id,
    }


def test_the_four_tools_are_listed_with_the_apis_rules(connect, world) -> None:
    async def listed() -> dict[str, Any]:
        async with connect(world["alice"]) as session:
            return {tool.name: tool for tool in (await session.list_tools()).tools}

    tools = run(listed())

    assert set(tools) == TOOLS
    for tool in tools.values():
        assert "call" in tool.description.lower(), tool.name
        assert tool.output_schema is not None, tool.name
    retrieve = tools["retrieve_context"].input_schema
    assert retrieve["required"] == ["query"]
    assert retrieve["properties"]["query"]["maxLength"] == 8000
    assert retrieve["properties"]["token_budget"]["minimum"] == 0
    kinds = retrieve["properties"]["source_kinds"]["anyOf"][0]["items"]["enum"]
    assert set(kinds) == {
        "codebase",
        "docs",
        "conversations",
        "issues",
        "workspace_live",
        "regulatory",
        "custom",
    }
    memory = tools["add_memory"].input_schema["properties"]
    assert (memory["importance"]["minimum"], memory["importance"]["maximum"]) == (0, 1)
    assert "decision" in memory["type"]["enum"]
    link = tools["link_response"].input_schema
    assert link["properties"]["response_id"]["maxLength"] == 256
    assert set(link["required"]) == {"attribution_id", "response_id"}


def test_retrieve_context_answers_citable_chunks_and_the_retrievals_ids(
    connect, world, runtime
) -> None:
    result = run(
        call(
            connect,
            world["alice"],
            "retrieve_context",
            query="authorise refund",
            space_id=world["project"],
            token_budget=1000,
        )
    )

    assert not result.is_error, text(result)
    shown = text(result)
    assert "[1] refunds.py:1-3 (authorise_refund) | project | score " in shown
    assert "related code, [1] calls this: refunds.py:6-7 (check_fraud) | project |" in shown
    assert "```python\ndef authorise_refund(order, amount):" in shown
    ids = result.structured_content
    assert ids is not None
    assert f"attributionId {ids['attributionId']}" in shown
    assert [c["path"] for c in ids["chunks"]] == ["refunds.py", "refunds.py"]
    assert ids["chunks"][1]["relatedRelation"] == "calls"
    with ContextLedger(runtime.url, world["admin"]) as cl:
        record = cl.wait_for_attribution(ids["attributionId"])
    assert record.request_id == ids["requestId"]
    assert record.user_id == "alice"
    client = record.record["client"]
    assert (client["clientName"], client["clientVersion"]) == ("context-ledger-mcp", __version__)


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_sdks_client_on_the_current_protocol_version_is_served_alike(
    runtime, world, transport: str, tmp_path: Path
) -> None:
    async def discover_and_retrieve() -> tuple[str, CallToolResult]:
        async with AsyncExitStack() as stack:
            if transport == "stdio":
                args = ["mcp", "--url", runtime.url, "--token", world["alice"]]
                server: Any = StdioServerParameters(
                    command=CL, args=args, env=clean_env(tmp_path / "home")
                )
            else:
                http = httpx2.AsyncClient(headers=bearer(world["alice"]), timeout=60)
                await stack.enter_async_context(http)
                server = streamable_http_client(f"{runtime.url}/mcp", http_client=http)
            client = await stack.enter_async_context(Client(server))  # probes server/discover
            arguments = {"query": "authorise refund", "space_id": world["project"]}
            return client.protocol_version, await client.call_tool("retrieve_context", arguments)

    version, result = run(discover_and_retrieve())

    assert version in MODERN_PROTOCOL_VERSIONS
    assert not result.is_error, text(result)
    assert "[1] refunds.py:1-3 (authorise_refund)" in text(result)


def test_link_response_records_the_answer_in_the_evidence_chain(connect, world, runtime) -> None:
    async def retrieve_and_link() -> tuple[CallToolResult, CallToolResult, CallToolResult]:
        async with connect(world["alice"]) as session:
            found = await session.call_tool(
                "retrieve_context", {"query": "refund", "space_id": world["team"]}
            )
            assert found.structured_content is not None
            attribution = found.structured_content["attributionId"]
            arguments = {"attribution_id": attribution, "response_id": "answer-1"}
            first = await session.call_tool("link_response", arguments)
            again = await session.call_tool("link_response", arguments)
            return found, first, again

    found, first, again = run(retrieve_and_link())

    assert not first.is_error, text(first)
    assert not again.is_error, text(again)  # idempotent
    assert first.structured_content is not None
    assert found.structured_content is not None
    attribution = found.structured_content["attributionId"]
    assert first.structured_content == {
        "attributionId": attribution,
        "requestId": found.structured_content["requestId"],
        "responseId": "answer-1",
    }
    with ContextLedger(runtime.url, world["admin"]) as cl:
        links = cl.attribution(attribution).links
    assert [link.response_id for link in links] == ["answer-1"]


def test_add_memory_then_search_memories_recalls_it(connect, world) -> None:
    async def remember_and_recall() -> tuple[CallToolResult, CallToolResult]:
        async with connect(world["admin"]) as session:
            added = await session.call_tool(
                "add_memory",
                {
                    "project": "billing",
                    "content": "Refunds above 500 EUR need a second approver.",
                    "type": "constraint",
                    "importance": 0.9,
                    "agent_key": "planner",
                    "metadata": {"ticket": "PAY-7"},
                },
            )
            found = await session.call_tool(
                "search_memories", {"project": "billing", "query": "refund approver"}
            )
            return added, found

    added, found = run(remember_and_recall())

    assert not added.is_error, text(added)
    assert added.structured_content is not None
    memory_id = added.structured_content["id"]
    assert added.structured_content["state"] == "accepted"
    assert text(added).startswith(f"Stored memory {memory_id} in project billing (constraint")
    assert not found.is_error, text(found)
    assert found.structured_content is not None
    [recalled] = found.structured_content["memories"]
    assert (recalled["id"], recalled["type"], recalled["agent_key"]) == (
        memory_id,
        "constraint",
        "planner",
    )
    assert recalled["metadata"] == {"ticket": "PAY-7"}
    assert f"[1] constraint | score {recalled['score']:.3f} | importance 0.9" in text(found)
    assert "Refunds above 500 EUR need a second approver." in text(found)


def test_a_space_the_caller_may_not_search_is_a_tool_error_with_the_apis_code(
    connect, world
) -> None:
    result = run(
        call(connect, world["mallory"], "retrieve_context", query="refund", space_id=world["team"])
    )

    assert result.is_error
    assert text(result) == "404 context.space.not_found: space not found"
    assert result.structured_content is None


def test_an_unknown_memory_project_is_a_tool_error_with_the_apis_code(connect, world) -> None:
    result = run(call(connect, world["alice"], "search_memories", project="nowhere"))

    assert result.is_error
    assert text(result) == "404 memory.project.not_found: project not found"


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("retrieve_context", {"query": ""}, "query"),
        ("retrieve_context", {"query": "x", "token_budget": -1}, "token_budget"),
        ("retrieve_context", {"query": "x", "source_kinds": ["nonsense"]}, "source_kinds"),
        ("add_memory", {"project": "has space", "content": "x"}, "project"),
        ("add_memory", {"project": "billing", "content": "x", "importance": 2}, "importance"),
        ("link_response", {"attribution_id": "a", "response_id": "r" * 257}, "response_id"),
        ("retrieve_context", {"query": "x", "bogus": 1}, "bogus"),
        ("add_memory", {"project": "billing", "content": "x", "confidence": 0.5}, "confidence"),
        ("search_memories", {"project": "billing", "memory_id": "relevant"}, "memory_id"),
        ("search_memories", {"project": "../etc"}, "project"),
        ("search_memories", {"project": ""}, "project"),
    ],
)
def test_arguments_that_break_the_apis_rules_are_a_tool_error_naming_the_field(
    connect, world, tool: str, arguments: dict[str, Any], field: str
) -> None:
    result = run(call(connect, world["alice"], tool, **arguments))

    assert result.is_error
    assert text(result).startswith(f"422 validation_failed: {field}"), text(result)
    assert "pydantic" not in text(result)
    assert "Arguments" not in text(result)


def test_a_rejected_argument_value_is_not_echoed_back(connect, world) -> None:
    secret = "ghp_" + "aB3" * 12 + "!"
    result = run(
        call(
            connect, world["alice"], "add_memory", project="billing", content="x", agent_key=secret
        )
    )

    assert text(result).startswith("422 validation_failed: agent_key: String should match")
    assert secret not in text(result)


def test_an_argument_or_tool_named_like_a_key_is_not_echoed_back(connect, world) -> None:
    key = "AKIAQ3EGRTW5NB7XKP2M"

    async def calls() -> tuple[CallToolResult, CallToolResult]:
        async with connect(world["alice"]) as session:
            extra = await session.call_tool("retrieve_context", {"query": "refund", key: "y"})
            unknown = await session.call_tool(key, {})
            return extra, unknown

    extra, unknown = run(calls())

    assert extra.is_error
    assert unknown.is_error
    assert text(extra).startswith(f"422 validation_failed: {UNSHOWN_NAME}: Extra")
    assert text(unknown) == "unknown tool: tools/list names this server's tools"
    assert key not in text(extra) + text(unknown)


def test_add_memory_with_dedupe_answers_the_stored_memory_instead_of_a_copy(connect, world) -> None:
    async def twice() -> tuple[CallToolResult, CallToolResult]:
        async with connect(world["admin"]) as session:
            arguments = {"project": "billing", "content": "Ship on Tuesdays.", "dedupe": True}
            first = await session.call_tool("add_memory", arguments)
            again = await session.call_tool(
                "add_memory", arguments | {"content": "  ship ON tuesdays. "}
            )
            return first, again

    first, again = run(twice())

    assert not first.is_error, text(first)
    assert not again.is_error, text(again)
    assert first.structured_content["duplicate"] is False
    assert again.structured_content["duplicate"] is True
    assert again.structured_content["id"] == first.structured_content["id"]
    assert text(again).startswith(f"Already stored as memory {first.structured_content['id']}")


def test_add_memory_with_more_stores_all_in_order_or_none(connect, world) -> None:
    async def batches() -> tuple[CallToolResult, CallToolResult, CallToolResult]:
        async with connect(world["admin"]) as session:
            stored = await session.call_tool(
                "add_memory",
                {
                    "project": "billing",
                    "content": "Invoices are numbered per year.",
                    "more": [
                        {"content": "Credit notes reference their invoice.", "type": "decision"},
                        {"content": "VAT is rounded per line.", "importance": 0.8},
                    ],
                },
            )
            refused = await session.call_tool(
                "add_memory",
                {"project": "billing", "content": "kept?", "more": [{"content": ""}]},
            )
            listed = await session.call_tool(
                "search_memories", {"project": "billing", "query": "kept", "limit": 10}
            )
            return stored, refused, listed

    stored, refused, listed = run(batches())

    assert not stored.is_error, text(stored)
    ids = stored.structured_content["ids"]
    assert len(ids) == 3
    assert stored.structured_content["id"] == ids[0]
    assert text(stored).splitlines()[0] == "Stored 3 of 3 memories in project billing."
    assert refused.is_error
    assert text(refused).startswith("422 validation_failed: more.0.content")
    contents = [m["content"] for m in listed.structured_content["memories"]]
    assert "kept?" not in contents
    assert len(contents) == 3


def test_search_memories_with_a_memory_id_reads_that_memory(connect, world) -> None:
    async def write_then_read() -> tuple[CallToolResult, CallToolResult, CallToolResult]:
        async with connect(world["admin"]) as session:
            added = await session.call_tool(
                "add_memory", {"project": "billing", "content": "Refund window is 30 days."}
            )
            memory_id = added.structured_content["id"]
            read = await session.call_tool(
                "search_memories", {"project": "billing", "memory_id": memory_id}
            )
            missing = await session.call_tool(
                "search_memories", {"project": "billing", "memory_id": "ctx_000000000000"}
            )
            return added, read, missing

    added, read, missing = run(write_then_read())

    [memory] = read.structured_content["memories"]
    assert memory["id"] == added.structured_content["id"]
    assert memory["content"] == "Refund window is 30 days."
    assert memory["score"] is None
    assert text(read).startswith(f"Memory {memory['id']} of project billing")
    assert missing.is_error
    assert text(missing).startswith("404 ")


def test_over_stdio_a_bad_credential_is_a_tool_error_401(runtime, world, tmp_path) -> None:
    async def with_bad_token() -> tuple[set[str], CallToolResult]:
        async with stdio_session(runtime.url, "not-a-token", tmp_path) as session:
            listed = {tool.name for tool in (await session.list_tools()).tools}
            return listed, await session.call_tool("retrieve_context", {"query": "refund"})

    listed, result = run(with_bad_token())

    assert listed == TOOLS  # listing calls no API: the credential is first refused by a call
    assert result.is_error
    assert text(result).startswith("401 unauthorized: ")


def test_over_http_a_bad_credential_is_refused_with_401_before_any_mcp(runtime, world) -> None:
    answers: list[httpx2.Response] = []

    async def keep(response: httpx2.Response) -> None:
        await response.aread()
        answers.append(response)

    async def initialise() -> None:
        async with http_session(runtime.url, "not-a-token", {"response": [keep]}):
            pass

    with pytest.raises(BaseExceptionGroup) as raised:  # the SDK's task groups wrap it
        run(initialise())

    assert raised.group_contains(MCPError, match="Server returned an error response")

    [refused] = answers
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"
    assert refused.headers["www-authenticate"].startswith("Bearer")
    missing = httpx.post(f"{runtime.url}/mcp", json={}, timeout=30)
    assert (missing.status_code, missing.json()) == (401, {"message": "Unauthorized"})


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_over_http_the_stream_and_session_methods_are_405(runtime, world, method: str) -> None:
    headers = {**bearer(world["alice"]), "Accept": "text/event-stream"}

    answer = httpx.request(method, f"{runtime.url}/mcp", headers=headers, timeout=30)

    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"
    assert answer.json()["error"]["message"].startswith("Method Not Allowed")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"jsonrpc": "1", "k": "AKIAQ3EGRTW5NB7XKP2M"}', -32600),
        (b'[{"jsonrpc": "2.0", "k": "AKIAQ3EGRTW5NB7XKP2M"}]', -32600),
        (b"{not json AKIAQ3EGRTW5NB7XKP2M", -32700),
    ],
    ids=["not json-rpc", "a batch", "not json"],
)
def test_over_http_a_message_that_is_not_json_rpc_is_400_without_echo_or_urls(
    runtime, world, body: bytes, code: int
) -> None:
    headers = {
        **bearer(world["alice"]),
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, content=body, timeout=30)

    assert answer.status_code == 400
    # JSON-RPC's own codes: the SDK calls an invalid message invalid params (-32602)
    assert answer.json()["error"]["code"] == code
    assert "AKIAQ3EGRTW5NB7XKP2M" not in answer.text
    assert "pydantic" not in answer.text


JSON_RPC_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


@pytest.mark.parametrize("request_id", [{}, [1], 1.5, 1.0, True, None], ids=repr)
def test_over_http_a_request_whose_id_is_not_a_string_or_integer_is_an_invalid_request(
    runtime, world, request_id: Any
) -> None:
    """MCP: a request's id is a string or an integer, never null. The SDK's transport took such
    a request for a notification: 202, no answer, a client waiting for one forever."""
    headers = {**bearer(world["alice"]), **JSON_RPC_HEADERS}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, json=body, timeout=30)

    assert answer.status_code == 400
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "Invalid request: a request's id is a string or an integer",
        },
    }


@pytest.mark.parametrize(
    "content_type", ["APPLICATION/JSON", "Application/Json; charset=utf-8", "application/json"]
)
def test_over_http_the_media_type_is_read_whatever_its_case(
    runtime, world, content_type: str
) -> None:
    headers = {**bearer(world["alice"]), "Content-Type": content_type, "Accept": "application/json"}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, content=body, timeout=30)

    assert (answer.status_code, answer.json()) == (200, {"jsonrpc": "2.0", "id": 1, "result": {}})


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/vnd.api+json", None],
)
def test_over_http_a_body_that_is_not_json_by_its_media_type_is_415(
    runtime, world, content_type: str | None
) -> None:
    headers = {**bearer(world["alice"]), "Accept": "application/json"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, content=body, timeout=30)

    assert answer.status_code == 415
    assert answer.json()["error"] == {
        "code": -32600,
        "message": "Unsupported Media Type: Content-Type must be application/json",
    }


@pytest.mark.parametrize("protocol", [None, "2026-07-28"])
def test_over_http_an_unknown_method_is_not_named_back(runtime, world, protocol) -> None:
    headers = {**bearer(world["alice"]), **JSON_RPC_HEADERS}
    params: dict[str, Any] = {}
    if protocol:
        headers["MCP-Protocol-Version"] = protocol
        headers["Mcp-Method"] = "AKIAQ3EGRTW5NB7XKP2M"
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": protocol,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
        }
    body = {"jsonrpc": "2.0", "id": 3, "method": "AKIAQ3EGRTW5NB7XKP2M", "params": params}

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, json=body, timeout=30)

    assert answer.json()["error"]["code"] == -32601
    assert answer.json()["id"] == 3
    assert "AKIAQ3EGRTW5NB7XKP2M" not in answer.text


MODERN = "2026-07-28"
META = "io.modelcontextprotocol/"


@pytest.mark.parametrize(
    ("header", "meta", "code", "message"),
    [
        (MODERN, None, -32602, "Invalid params: an MCP-Protocol-Version header other than"),
        (
            "AKIAQ3EGRTW5NB7XKP2M",
            {f"{META}protocolVersion": "AKIAQ3EGRTW5NB7XKP2M", f"{META}clientCapabilities": {}},
            None,  # the SDK's ladder says which rule it breaks first
            None,
        ),
    ],
    ids=["no _meta", "unknown version"],
)
def test_over_http_a_protocol_refusal_says_what_is_wrong_in_fixed_words(
    runtime, world, header: str, meta: dict | None, code: int, message: str
) -> None:
    headers = {**bearer(world["alice"]), **JSON_RPC_HEADERS, "MCP-Protocol-Version": header}
    body = {"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"_meta": meta} if meta else {}}

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, json=body, timeout=30)

    assert 400 <= answer.status_code < 500
    refusal = answer.json()
    if code is None:
        code = refusal["error"]["code"]
        message = PROTOCOL_REFUSALS[code]  # one of the protocol refusals, in its fixed words
    assert refusal["error"]["code"] == code
    assert refusal["error"]["message"].startswith(message)
    assert refusal["id"] == 9
    assert "AKIAQ3EGRTW5NB7XKP2M" not in answer.text


@pytest.mark.parametrize("request_id", [7, "req-7"], ids=repr)
def test_over_http_a_request_with_a_string_or_integer_id_is_answered_under_it(
    runtime, world, request_id: Any
) -> None:
    headers = {**bearer(world["alice"]), **JSON_RPC_HEADERS}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "ping"}

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, json=body, timeout=30)

    assert answer.status_code == 200
    assert answer.json() == {"jsonrpc": "2.0", "id": request_id, "result": {}}


def test_over_http_a_body_over_the_limit_is_413_as_a_json_rpc_error(runtime, world) -> None:
    """The transport's own refusal is plain text; a JSON-RPC client gets an error it can read."""
    headers = {
        **bearer(world["alice"]),
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    padding = "x" * (MAX_BODY_BYTES + 1)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"p": padding}})

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, content=body, timeout=60)

    assert answer.status_code == 413
    assert answer.headers["content-type"] == "application/json"
    error = answer.json()["error"]
    assert error["code"] == -32600
    assert error["message"] == "Request body too large: at most 4 MiB"


def test_an_unreachable_api_is_a_tool_error_and_the_server_keeps_serving(
    connect, transport, world, monkeypatch, tmp_path
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    if transport == "http":
        # The runtime's functions share this process: McpFunction reads its setting per request.
        monkeypatch.setenv("KEYSTONE_MCP_API_URL", nowhere)
        get_settings.cache_clear()

    async def twice() -> list[CallToolResult]:
        if transport == "stdio":
            session_of = stdio_session(nowhere, world["alice"], tmp_path)
        else:
            session_of = connect(world["alice"])
        async with session_of as session:
            return [
                await session.call_tool("retrieve_context", {"query": "refund"}) for _ in range(2)
            ]

    try:
        results = run(twice())
    finally:
        monkeypatch.delenv("KEYSTONE_MCP_API_URL", raising=False)
        get_settings.cache_clear()

    for result in results:
        assert result.is_error
        assert text(result).startswith(f"unreachable: cannot reach {nowhere}: ")


def test_mcp_finds_the_running_dev_server_and_the_token_in_the_environment(
    runtime, world, tmp_path
) -> None:
    home = tmp_path / "home"
    write_dev_url(home, runtime.url)

    async def retrieve() -> CallToolResult:
        token = {"CONTEXT_LEDGER_TOKEN": world["alice"]}
        async with stdio_session(None, None, tmp_path, CONTEXT_LEDGER_HOME=str(home), **token) as s:
            return await s.call_tool(
                "retrieve_context", {"query": "refund", "space_id": world["project"]}
            )

    result = run(retrieve())

    assert not result.is_error, text(result)
    assert "refunds.py" in text(result)


def test_mcp_without_a_token_says_how_to_give_one(tmp_path) -> None:
    ran = subprocess.run(
        [CL, "mcp"], env=clean_env(tmp_path), capture_output=True, text=True, timeout=60
    )

    assert ran.returncode == 2
    assert ran.stdout == ""
    assert ran.stderr == "context-ledger: give --token or set CONTEXT_LEDGER_TOKEN\n"


def test_the_sample_event_lists_the_tools_through_the_function(runtime) -> None:
    event = json.loads((Path(__file__).parents[2] / "events/mcp-tools-list.json").read_text())

    # On a thread of its own, as the runtime's HTTP server calls it: the main thread's event loop
    # is whatever the tests before left.
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(runtime.invoke, "McpFunction", event).result()

    assert answer["statusCode"] == 200
    listed = json.loads(answer["body"])["result"]["tools"]
    assert {tool["name"] for tool in listed} == TOOLS


def documented_agent_configurations() -> list[dict[str, Any]]:
    """The stdio server entries of the JSON blocks in docs/mcp.md, "Connecting an agent" (the
    README's "Use it from an agent" links there)."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    section = guide.split("\n## Connecting an agent\n", 1)[1].split("\n## ", 1)[0]
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S)]
    return [
        entry
        for block in blocks
        for entry in (block.get("mcpServers") or block.get("servers") or {}).values()
    ]


@pytest.mark.parametrize("entry", documented_agent_configurations(), ids=["mcpServers", "servers"])
def test_the_documented_agent_configurations_start_a_server_that_answers(
    runtime, world, tmp_path, entry: dict[str, Any]
) -> None:
    home = tmp_path / "home"
    write_dev_url(home, runtime.url)  # the make dev of that home

    def filled(value: str) -> str:
        value = value.replace("/path/to/context-ledger/.venv/bin/", f"{Path(CL).parent}/")
        value = value.replace("/path/to/context-ledger/.context-ledger", str(home))
        return re.sub(r"^(ctxl_\.\.\.|\$\{input:[\w-]+\})$", world["alice"], value)

    async def retrieve() -> CallToolResult:
        env = {**clean_env(tmp_path), **{k: filled(v) for k, v in entry["env"].items()}}
        params = StdioServerParameters(
            command=filled(entry["command"]), args=entry["args"], env=env
        )
        async with stdio_client(params) as streams, ClientSession(*streams) as session:
            await session.initialize()
            return await session.call_tool("retrieve_context", {"query": "refund"})

    assert entry.get("type", "stdio") == "stdio"
    result = run(retrieve())

    assert not result.is_error, text(result)


SECRET = "AKIAQ3EGRTW5NB7XKP2M"
EMAIL = "jane.doe@acme-corp.com"


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("resources/read", {"uri": f"https://ops:Tr0ub4dor@x.io/{SECRET}/{EMAIL}"}),
        ("prompts/get", {"name": f"{SECRET} {EMAIL}"}),
        ("prompts/get", {"name": "summary", "arguments": {"key": SECRET}}),
        ("tools/call", {"name": {"k": SECRET}, "arguments": {}}),
        ("resources/read", {"uri": {"k": SECRET}}),
        ("initialize", {"protocolVersion": SECRET, "capabilities": {}}),
    ],
    ids=["unknown resource", "unknown prompt", "prompt arguments", "tool name", "uri", "init"],
)
def test_over_http_an_sdk_error_answer_echoes_nothing_the_caller_sent(
    runtime, world, method: str, params: dict[str, Any]
) -> None:
    """Resources and prompts this server does not have, and params the SDK refuses, answer a
    JSON-RPC error of a valid code in fixed words: no uri, name, argument or value comes back."""
    headers = {**bearer(world["alice"]), **JSON_RPC_HEADERS}
    body = {"jsonrpc": "2.0", "id": 4, "method": method, "params": params}

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, json=body, timeout=30)

    error = answer.json()["error"]
    assert error["code"] in (-32602, -32600, -32601), error
    assert answer.json()["id"] == 4
    for sent in (SECRET, EMAIL, "Tr0ub4dor"):
        assert sent not in answer.text
    assert "data" not in error


def test_an_unknown_resource_or_prompt_is_invalid_params_in_fixed_words(connect, world) -> None:
    """Over both transports: the server offers no resources and no prompts, and says so."""

    async def calls() -> list[MCPError]:
        errors = []
        async with connect(world["alice"]) as session:
            for request in (
                session.read_resource(f"https://x.io/{SECRET}"),
                session.get_prompt(f"prompt-{SECRET}"),
            ):
                with pytest.raises(MCPError) as raised:
                    await request
                errors.append(raised.value)
        return errors

    errors = run(calls())

    assert [e.error.code for e in errors] == [-32602, -32602]
    assert [e.error.message for e in errors] == [
        "Unknown resource: resources/list names this server's resources",
        "Unknown prompt: prompts/list names this server's prompts",
    ]
    assert all(e.error.data is None for e in errors)


@pytest.mark.parametrize(
    ("accept", "status"),
    [
        ("application/json;q=0", 406),
        ("application/json; q=0.0, text/event-stream", 406),
        ("*/*;q=0", 406),
        ("text/html", 406),
        ("application/json;q=0.5", 200),
        ("application/json;q=0, */*;q=0.1", 200),
        ("APPLICATION/JSON", 200),
    ],
)
def test_over_http_an_accept_that_admits_no_json_is_406(runtime, world, accept, status) -> None:
    """RFC 9110: a range with q=0 is "not acceptable", not accepted for being named."""
    headers = {**bearer(world["alice"]), "Content-Type": "application/json", "Accept": accept}
    body = {"jsonrpc": "2.0", "id": 5, "method": "ping"}

    answer = httpx.post(f"{runtime.url}/mcp", headers=headers, json=body, timeout=30)

    assert answer.status_code == status, answer.text
    if status == 406:
        assert answer.json()["error"]["code"] == -32600
