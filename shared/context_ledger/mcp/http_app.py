"""``McpFunction``: the tools over streamable HTTP at ``/mcp``, behind the API's authorizer.

Stateless, with JSON answers, so it fits Lambda: every POST is one JSON-RPC message answered in
its own invocation, with no session to keep and no stream left open (a fresh SDK session
manager per request; docs/decisions.md, "The MCP server"). A ``GET`` (the optional stream of
server-initiated messages) and a ``DELETE`` (ending a session) are ``405``, as the transport's
specification has it for a server without them.

The caller's bearer credential is checked by the authorizer like on every route (a refused one
is ``401`` here, before any MCP), then forwarded unchanged to the API, so each tool call is the
caller's own request. The API is ``KEYSTONE_MCP_API_URL``, else the URL this request came in on:
the API Gateway domain in AWS, the local runtime's own address under ``make dev``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
)
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, KNOWN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from context_ledger.auth.authorizer import bearer_token
from context_ledger.errors import UnauthorizedError
from context_ledger.http.body import ClientGone, read_body, replay
from context_ledger.http.principal import verified_principal
from context_ledger.mcp import CLIENT_NAME
from context_ledger.mcp.tools import UNKNOWN_PROMPT, UNKNOWN_RESOURCE, build_server
from context_ledger.settings import get_settings
from context_ledger_client import AsyncContextLedger

MCP_PATH = "/mcp"
_DEFAULT_PORTS = {"https": "443", "http": "80"}
#: No Host/Origin allow-list: the API's hosts vary (execute-api, custom domains, loopback), and
#: the credential is a bearer header that a browser never attaches by itself, so a page that
#: reaches the endpoint through DNS rebinding has nothing to call the API with.
_TRANSPORT_SECURITY = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def create_mcp_app() -> ASGIApp:
    """The function's ASGI app (one MCP server per process; one session manager per request)."""
    server = build_server(_caller_client)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # Lambda has no lifespan: each request starts what it needs
        try:
            verified_principal(scope)
        except UnauthorizedError as exc:
            await _unauthorized(exc)(scope, receive, send)
            return
        if scope["method"] != "POST":
            await _method_not_allowed()(scope, receive, send)
            return
        if _media_type(scope) != "application/json":
            await _unsupported_media_type()(scope, receive, send)
            return
        if _refuses_json(scope):
            await _not_acceptable()(scope, receive, send)
            return
        scope = _with_media_type(scope, "application/json")
        try:
            body = await read_body(receive, MAX_BODY_BYTES)
        except ClientGone:
            return
        if body is None:
            await _too_large()(scope, receive, send)
            return
        if _has_malformed_id(body):
            await _invalid_request(_MALFORMED_ID)(scope, receive, send)
            return
        receive = replay(body, receive)
        # The SDK's stateless manager runs once; a fresh one serves this request alone.
        streamable = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=MAX_BODY_BYTES,
            transport_security=_TRANSPORT_SECURITY,
        )
        async with streamable.router.lifespan_context(streamable):
            await streamable(scope, receive, _json_rpc_refusals(send))

    return app


#: The transport's limit on a request body (the SDK's default, 4 MiB).
MAX_BODY_BYTES = 4 * 1024 * 1024

_NOT_JSON = "Parse error: the body is not JSON this server can read"
_MISSING_META = (
    "Invalid params: an MCP-Protocol-Version header other than the initialize handshake's"
    f" versions ({', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}) selects protocol 2026-07-28, whose"
    " params._meta carries io.modelcontextprotocol/protocolVersion and"
    " io.modelcontextprotocol/clientCapabilities"
)
#: The 2026-07-28 transport's refusals of a well-formed message, in fixed words of their own (the
#: SDK's may quote the headers they name).
PROTOCOL_REFUSALS = {
    HEADER_MISMATCH: "Header mismatch: an MCP header is missing, repeated or not the body's",
    MISSING_REQUIRED_CLIENT_CAPABILITY: "The request does not declare a client capability it needs",
    UNSUPPORTED_PROTOCOL_VERSION: "Unsupported protocol version; this server speaks "
    + ", ".join(KNOWN_PROTOCOL_VERSIONS),
}
_NOT_JSON_RPC = "Invalid request: not a JSON-RPC 2.0 request, notification or response"
_MALFORMED_ID = "Invalid request: a request's id is a string or an integer"


def _media_type(scope: Scope) -> str:
    """The request's media type, lower case, without parameters (RFC 9110: case-insensitive)."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.decode("latin-1").split(";", 1)[0].strip().lower()
    return ""


_JSON_RANGES = frozenset({"application/json", "application/*", "*/*"})


def _refuses_json(scope: Scope) -> bool:
    """Whether the request's Accept names ``application/json`` (or a range holding it) only
    with ``q=0``, RFC 9110's "not acceptable", which the SDK reads as accepted because the
    words are there. Without such a range the SDK's own check answers 406."""
    ranges = [
        part.strip().lower()
        for name, value in scope["headers"]
        if name == b"accept"
        for part in value.decode("latin-1").split(",")
    ]
    weights = [_weight(r) for r in ranges if r.split(";", 1)[0].strip() in _JSON_RANGES]
    return bool(weights) and max(weights) == 0


def _weight(media_range: str) -> float:
    for parameter in media_range.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0  # a weight that is no number accepts nothing
    return 1.0


def _not_acceptable() -> Response:
    message = "Not Acceptable: Client must accept application/json"
    return Response(_error_body(INVALID_REQUEST, message), 406, media_type="application/json")


def _with_media_type(scope: Scope, media_type: str) -> Scope:
    """``scope`` with its Content-Type's media type spelt as the SDK compares it (exactly)."""
    headers = []
    for name, value in scope["headers"]:
        if name == b"content-type":
            rest = value.decode("latin-1").partition(";")[2]
            value = (media_type + (f";{rest}" if rest else "")).encode("latin-1")
        headers.append((name, value))
    return {**scope, "headers": headers}


def _unsupported_media_type() -> Response:
    message = "Unsupported Media Type: Content-Type must be application/json"
    return Response(_error_body(INVALID_REQUEST, message), 415, media_type="application/json")


def _has_malformed_id(body: bytes) -> bool:
    """Whether ``body`` is one request (an object with a ``method`` and an ``id``) whose id is
    neither a string nor an integer: MCP's rule, stricter than JSON-RPC's (no null, no
    fraction). The SDK's 2025 transport takes such a message for a notification, answers 202
    and drops it, so the client waits for an answer that never comes; a message that is not
    JSON is left to the SDK's own refusals."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return False
    request_id = message["id"]
    return isinstance(request_id, bool) or not isinstance(request_id, str | int)


def _json_rpc_refusals(send: Send) -> Send:
    """``send`` with the transport's refusals reworded. Its ``400`` bodies become a fixed
    JSON-RPC error of the same meaning: the SDK answers a message that is not JSON-RPC with
    pydantic's report of it, the rejected input (a key pasted by mistake included) and
    documentation URLs, which no client of this API is ever sent (tool argument errors are worded
    by ``tools.LedgerServer``). Its other error answers say their code's fixed words, without
    ``data`` (:func:`_in_fixed_words`). (A body over the size limit is refused before the SDK
    reads it.)"""
    held: dict[str, Any] = {}

    async def sanitising(message: Message) -> None:
        if message["type"] == "http.response.start" and (
            message["status"] == 400 or _is_json(message)
        ):
            held["start"] = message
            return
        if "start" not in held:
            await send(message)
            return
        held["body"] = held.get("body", b"") + message.get("body", b"")
        if message.get("more_body"):
            return
        start, body = held["start"], held["body"]
        if start["status"] == 400:
            body = _fixed_error(body)
        elif b'"error"' in body:
            body = _in_fixed_words(body)
        headers = [
            (k, v)
            for k, v in start["headers"]
            if k.lower() not in (b"content-length", b"content-type")
        ]
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return sanitising


def _is_json(start: Message) -> bool:
    return any(
        k.lower() == b"content-type" and v.lower().startswith(b"application/json")
        for k, v in start["headers"]
    )


#: What an error answer of each JSON-RPC code says, whatever the SDK said: its messages and
#: ``data`` quote the method, the uri, a tool's or a prompt's name and pydantic's report of the
#: params, the rejected values included. Codes outside JSON-RPC's (the SDK answers 0 for an
#: exception it did not expect) are internal errors.
_FIXED_WORDS = {
    PARSE_ERROR: _NOT_JSON,
    INVALID_REQUEST: _NOT_JSON_RPC,
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params: the request's params break the method's schema",
    INTERNAL_ERROR: "Internal error",
}
#: This server's own errors, already in fixed words (mcp/tools.py).
_OWN_WORDS = {(INVALID_PARAMS, UNKNOWN_RESOURCE), (INVALID_PARAMS, UNKNOWN_PROMPT)}


def _in_fixed_words(body: bytes) -> bytes:
    """A JSON-RPC error answer with its code's fixed words and without ``data``; any other
    answer as it is."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        return body
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return body
    code, message = error.get("code"), error.get("message")
    if (code, message) not in _OWN_WORDS and code not in PROTOCOL_REFUSALS:
        code = code if code in _FIXED_WORDS else INTERNAL_ERROR
        message = _FIXED_WORDS[code]
    answer["error"] = {"code": code, "message": message}
    return json.dumps(answer, separators=(",", ":")).encode()


def _fixed_error(original: bytes) -> bytes:
    """The fixed error for the SDK's ``400`` answer ``original``, under the request's id when
    the SDK read one: a parse error stays one; the 2026-07-28 transport's refusals of headers,
    protocol version or ``_meta`` keep their codes, in fixed words; any other ``400`` is an
    invalid request (-32600), which the SDK's 2025 transport calls invalid params (-32602) and
    explains by quoting the input."""
    try:
        refusal = json.loads(original)
        code, message = int(refusal["error"]["code"]), str(refusal["error"]["message"])
        request_id = refusal.get("id")
    except (ValueError, KeyError, TypeError, AttributeError):
        code, message, request_id = INVALID_REQUEST, "", None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    if code == PARSE_ERROR:
        return _error_body(PARSE_ERROR, _NOT_JSON)
    if code in PROTOCOL_REFUSALS:
        return _error_body(code, PROTOCOL_REFUSALS[code], request_id)
    if code == INVALID_PARAMS and message.startswith("params._meta"):
        return _error_body(code, _MISSING_META, request_id)
    return _error_body(INVALID_REQUEST, _NOT_JSON_RPC)


def _error_body(code: int, message: str, request_id: str | int | None = None) -> bytes:
    error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
    return error.model_dump_json(by_alias=True, exclude_unset=True).encode()


def _too_large() -> Response:
    limit = MAX_BODY_BYTES // (1024 * 1024)
    message = f"Request body too large: at most {limit} MiB"
    return Response(_error_body(INVALID_REQUEST, message), 413, media_type="application/json")


def _invalid_request(message: str) -> Response:
    return Response(_error_body(INVALID_REQUEST, message), 400, media_type="application/json")


def _caller_client(ctx: Context) -> AsyncContextLedger:
    """A client calling the API as the caller of this HTTP request."""
    request = ctx.request_context.request
    assert isinstance(request, Request)  # the streamable HTTP transport hands its request here
    token = bearer_token(dict(request.headers))
    return AsyncContextLedger(api_url(request.scope), token, client_name=CLIENT_NAME)


def api_url(scope: Mapping[str, Any]) -> str:
    """``KEYSTONE_MCP_API_URL``, else the origin the Lambda event says the request reached:
    ``requestContext.domainName`` (set by API Gateway, never by the caller), with the scheme and
    port API Gateway forwards (the ``$default`` stage has no path prefix)."""
    configured = get_settings().mcp_api_url
    if configured:
        return configured.rstrip("/")
    event = scope["aws.event"]
    headers = event.get("headers") or {}
    scheme = headers.get("x-forwarded-proto", "https")
    port = headers.get("x-forwarded-port")
    origin = f"{scheme}://{event['requestContext']['domainName']}"
    return origin if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{origin}:{port}"


def _unauthorized(exc: UnauthorizedError) -> Response:
    """The API's own 401, as any route answers a refused credential."""
    challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
    return JSONResponse(exc.body(), status_code=exc.status, headers=challenge)


def _method_not_allowed() -> Response:
    return Response(
        _error_body(INVALID_REQUEST, "Method Not Allowed: POST JSON-RPC messages"),
        status_code=405,
        media_type="application/json",
        headers={"Allow": "POST"},
    )
