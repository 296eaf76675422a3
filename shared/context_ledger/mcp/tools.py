"""The MCP tools, one per thing an agent does with Context Ledger, each one call of the client.

Argument schemas carry the API's own rules (lengths, ranges, enums, patterns: the limits are the
API's constants, and tests/unit/test_mcp_schemas.py holds them to the API's request models), so a
model learns them from ``tools/list`` and is told at once when it breaks one. Whatever the API
still refuses, or a service that cannot be reached, comes back as a tool error (``isError``)
whose text is ``<status> <code>: <message>``, the API's code and message: never a crash of the
server, never a JSON-RPC error the model cannot read.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any, Literal, TypeVar

from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from context_ledger import __version__
from context_ledger.dlp.texts import echoed
from context_ledger.errors import ValidationFailedError, shown_name, validation_message
from context_ledger.mcp import results
from context_ledger.memory.model import (
    AGENT_KEY,
    DEFAULT_IMPORTANCE,
    MAX_CONTENT_CHARS,
    MAX_METADATA_BYTES,
    MEMORY_ID,
    PROJECT_KEY,
    MemoryType,
)
from context_ledger.retrieval.limits import (
    DEFAULT_MAX_PER_LEVEL,
    DEFAULT_TOKEN_BUDGET,
    MAX_MAX_PER_LEVEL,
    MAX_TOKEN_BUDGET,
)
from context_ledger.sources.model import SourceKind
from context_ledger_client import AsyncContextLedger, ContextLedgerError, NewMemory

#: Where each tool call's client comes from: the process's one client (stdio), or a client with
#: the HTTP request's own credential (streamable HTTP).
Clients = Callable[[Context], AbstractAsyncContextManager[AsyncContextLedger]]
_Tool = TypeVar("_Tool", bound=Callable[..., Any])

#: the API's limits that have no constant of their own (http/retrieve.py, http/memory.py,
#: http/attributions.py)
MAX_QUERY_CHARS = 8000
MAX_ID_CHARS = 128
MAX_RESPONSE_ID_CHARS = 256
MAX_SOURCE_KINDS = 16
#: memories per add_memory call (the API's batch limit, http/memory.py)
MAX_BATCH = 100
#: how long link_response waits for the attribution record, written asynchronously after the
#: retrieval (the spec: "retry for a few seconds")
LINK_WAIT_SECONDS = 10.0

INSTRUCTIONS = """\
Context Ledger serves the context your organisation's code, docs and issues hold, trimmed to what \
the user may read, and records which context each answer used. Call retrieve_context before \
answering a question about the user's code base or documents, and cite the chunks you use by \
path and lines. When your answer used a retrieval, call link_response with its attributionId. \
Use search_memories to recall a project's decisions, constraints and preferences, and \
add_memory to keep one worth remembering."""

SourceKindName = Literal[tuple(kind.value for kind in SourceKind)]  # type: ignore[valid-type]
MemoryTypeName = Literal[tuple(kind.value for kind in MemoryType)]  # type: ignore[valid-type]

Query = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS),
    Field(description="What the context is for, in words: a question or a task"),
]
MemoryContent = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_CONTENT_CHARS),
    Field(description="The memory, self-contained: it is read later without this chat"),
]
MemoryTypeArgument = Annotated[MemoryTypeName, Field(description="What the memory records")]
Importance = Annotated[
    float,
    Field(
        ge=0,
        le=1,
        strict=True,
        allow_inf_nan=False,
        description="0 to 1: how much it should weigh when recalled",
    ),
]
AgentKeyArgument = Annotated[
    str | None,
    StringConstraints(pattern=AGENT_KEY.pattern),
    Field(description="Which agent writes it (e.g. planner), to tell agents apart"),
]
Metadata = Annotated[
    dict[str, Any] | None,
    Field(
        description=f"Free-form JSON kept with the memory (at most {MAX_METADATA_BYTES} bytes), "
        "e.g. a ticket id"
    ),
]


class MoreMemory(BaseModel):
    """A further memory of one ``add_memory`` call: the first's fields and rules (``dedupe``
    is the call's, for every memory of it)."""

    model_config = ConfigDict(extra="forbid")

    content: MemoryContent
    type: MemoryTypeArgument = MemoryType.FACT.value
    importance: Importance = DEFAULT_IMPORTANCE
    agent_key: AgentKeyArgument = None
    metadata: Metadata = None

    def new(self, dedupe: bool) -> NewMemory:
        return NewMemory(
            self.content,
            type=self.type,
            agent_key=self.agent_key,
            importance=self.importance,
            metadata=self.metadata,
            dedupe=dedupe or None,
        )


ProjectKey = Annotated[
    str,
    StringConstraints(pattern=PROJECT_KEY.pattern),
    Field(
        description="The memory project's key (1-128 letters, digits, '.', '_' or '-', starting "
        "with a letter or digit), e.g. the repository's name"
    ),
]


#: The answers to a resource or a prompt asked for by name: this server has neither, and the
#: SDK's own answers name the uri or the name back (a key pasted into one included).
UNKNOWN_RESOURCE = "Unknown resource: resources/list names this server's resources"
UNKNOWN_PROMPT = "Unknown prompt: prompts/list names this server's prompts"


class LedgerServer(MCPServer):
    """The SDK's server, answering arguments that break a tool's schema as the API answers a
    body that breaks its rules (``422 validation_failed: importance: ...``), not with pydantic's
    report (the model class, the rejected value, a documentation URL); and a resource or a
    prompt, which it has none of, with invalid params in fixed words."""

    async def read_resource(self, uri: Any, context: Context | None = None) -> Any:
        raise MCPError(code=INVALID_PARAMS, message=UNKNOWN_RESOURCE)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context | None = None
    ) -> Any:
        raise MCPError(code=INVALID_PARAMS, message=UNKNOWN_PROMPT)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        tool = self._tool_manager.get_tool(name)
        if tool is None:  # the SDK's own answer names it back, whatever the name holds
            text = "unknown tool: tools/list names this server's tools"
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        unknown = sorted(set(arguments) - set(tool.parameters.get("properties", {})))
        if unknown:
            # The API refuses fields it does not know (a typo must not pass for a default).
            return _argument_error(
                "; ".join(f"{shown_name(u)}: Extra inputs are not permitted" for u in unknown)
            )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            return _argument_error(validation_message(cause.errors(include_input=False), skip=""))


def _argument_error(message: str) -> CallToolResult:
    """The tool error of arguments the API would refuse; argument names the caller wrote are
    redacted like any text the service echoes."""
    text = f"{ValidationFailedError.status} {ValidationFailedError.code}: {echoed(message)}"
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build_server(clients: Clients) -> MCPServer:
    """The server with the four tools; each call gets its client from ``clients``."""
    server = LedgerServer(
        name="context-ledger",
        title="Context Ledger",
        version=__version__,
        instructions=INSTRUCTIONS,
    )

    @_tool(
        server,
        name="retrieve_context",
        title="Retrieve context",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def retrieve_context(
        ctx: Context,
        query: Query,
        space_id: Annotated[
            str | None,
            Field(
                description="The space to search from (a UUID): that space and its ancestors up "
                "to the organisation. Leave it out for the organisation and your personal space."
            ),
        ] = None,
        token_budget: Annotated[
            int,
            Field(
                ge=0,
                strict=True,
                description=f"Tokens of context at most (above {MAX_TOKEN_BUDGET} lowered to "
                f"{MAX_TOKEN_BUDGET})",
            ),
        ] = DEFAULT_TOKEN_BUDGET,
        max_per_level: Annotated[
            int,
            Field(
                ge=1,
                strict=True,
                description=f"Chunks per space level at most (above {MAX_MAX_PER_LEVEL} lowered)",
            ),
        ] = DEFAULT_MAX_PER_LEVEL,
        source_kinds: Annotated[
            list[SourceKindName] | None,
            Field(
                max_length=MAX_SOURCE_KINDS,
                description="Only sources of these kinds (leave out for every kind)",
            ),
        ] = None,
        exclude_related: Annotated[
            bool,
            Field(
                strict=True,
                description="true: no related code (callers, callees, tests of the top chunks)",
            ),
        ] = False,
        session_id: Annotated[
            str | None,
            Field(
                max_length=MAX_ID_CHARS,
                description="Your conversation's id, recorded with the retrieval",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, results.RetrieveOutput]:
        """Search the code, docs, issues and other sources the user may read for the context a
        question needs: ranked chunks that fit the token budget, each with its path, lines,
        symbol, space level and score, related code (callers, callees, tests) after them. Call
        it before answering about the user's code base or documents and cite chunks by path and
        lines. Every retrieval is recorded as evidence: its attributionId goes to link_response
        once an answer uses it."""
        try:
            async with clients(ctx) as client:
                answer = await client.retrieve(
                    query,
                    space_id=space_id,
                    token_budget=token_budget,
                    max_per_level=max_per_level,
                    source_kinds=source_kinds,
                    exclude_related=exclude_related,
                    session_id=session_id,
                )
        except ContextLedgerError as exc:
            return tool_error(exc)
        return _result(*results.retrieval(query, answer))

    @_tool(
        server,
        name="search_memories",
        title="Search memories",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def search_memories(
        ctx: Context,
        project: ProjectKey,
        query: Annotated[
            str,
            StringConstraints(max_length=MAX_QUERY_CHARS),
            Field(description="What to recall; empty: the most important and recent memories"),
        ] = "",
        limit: Annotated[
            int, Field(ge=1, strict=True, description="Memories to return at most")
        ] = 5,
        memory_id: Annotated[
            str | None,
            StringConstraints(pattern=MEMORY_ID.pattern),
            Field(
                description="Read this one memory (an id an earlier answer gave) instead of "
                "searching; query and limit are then ignored"
            ),
        ] = None,
    ) -> Annotated[CallToolResult, results.SearchMemoriesOutput]:
        """Recall what agents and people stored about a project: decisions, constraints, facts,
        preferences, to-dos and notes, ranked by similarity to the query, recency, importance
        and use. Call it when starting work on a project or before a choice a past decision may
        settle. Every memory is returned however weakly it matches: judge by its score. With
        memory_id, it reads that one memory."""
        try:
            async with clients(ctx) as client:
                if memory_id is not None:
                    memory = await client.memory(project, memory_id)
                    return _result(*results.one_memory(memory))
                found = await client.relevant_memories(project, query, limit=limit)
        except ContextLedgerError as exc:
            return tool_error(exc)
        return _result(*results.memories(found))

    @_tool(
        server,
        name="add_memory",
        title="Add a memory",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    )
    async def add_memory(
        ctx: Context,
        project: ProjectKey,
        content: MemoryContent,
        type: MemoryTypeArgument = MemoryType.FACT.value,
        importance: Importance = DEFAULT_IMPORTANCE,
        agent_key: AgentKeyArgument = None,
        metadata: Metadata = None,
        dedupe: Annotated[
            bool,
            Field(
                strict=True,
                description="true: if a live memory of the same type says the same (whitespace "
                "and case aside), answer it instead of storing a copy",
            ),
        ] = False,
        more: Annotated[
            list[MoreMemory] | None,
            Field(
                max_length=MAX_BATCH - 1,
                description="Further memories stored in the same call, all or none of them "
                f"(at most {MAX_BATCH} in all)",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, results.AddMemoryOutput]:
        """Store something worth remembering about a project for later sessions and other
        agents: a decision and why, a constraint, a fact, a preference, a to-do or a note. The
        first memory creates the project. Call it when the user settles something or asks you
        to remember it, not for what the code or docs already say. Pass dedupe=true to avoid
        storing what is already there; put several memories in one call with more."""
        first = MoreMemory(
            content=content,
            type=type,
            importance=importance,
            agent_key=agent_key,
            metadata=metadata,
        )
        try:
            async with clients(ctx) as client:
                if more:
                    items = [item.new(dedupe) for item in (first, *more)]
                    batch = await client.write_memories(project, items)
                    return _result(*results.written_batch(batch))
                memory = await client.write_memory(
                    project,
                    content,
                    type=type,
                    agent_key=agent_key,
                    importance=importance,
                    metadata=metadata,
                    dedupe=dedupe or None,
                )
        except ContextLedgerError as exc:
            return tool_error(exc)
        return _result(*results.written(memory))

    @_tool(
        server,
        name="link_response",
        title="Link a response to its retrieval",
        annotations=ToolAnnotations(
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    )
    async def link_response(
        ctx: Context,
        attribution_id: Annotated[
            str, Field(description="The attributionId retrieve_context returned")
        ],
        response_id: Annotated[
            str,
            StringConstraints(min_length=1, max_length=MAX_RESPONSE_ID_CHARS),
            Field(description="Your answer's id (a message or response id of your host)"),
        ],
    ) -> Annotated[CallToolResult, results.LinkOutput]:
        """Record in the evidence chain that an answer used a retrieval: call it once you have
        answered with context from retrieve_context, with that call's attributionId and your
        answer's id. Linking the same pair again changes nothing."""
        try:
            async with clients(ctx) as client:
                # The record is written asynchronously after the retrieval: wait for it first.
                record = await client.wait_for_attribution(
                    attribution_id, timeout=LINK_WAIT_SECONDS
                )
                await client.link(attribution_id, response_id)
        except ContextLedgerError as exc:
            return tool_error(exc)
        return _result(*results.linked(attribution_id, record.request_id, response_id))

    return server


def _tool(server: MCPServer, **options: Any) -> Callable[[_Tool], _Tool]:
    """``server.tool`` with the function's docstring, dedented, as the tool's description."""

    def register(fn: _Tool) -> _Tool:
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), **options)
        return fn

    return register


def _result(text: str, structured: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured.model_dump(mode="json", by_alias=True),
    )


def tool_error(exc: ContextLedgerError) -> CallToolResult:
    """The API's refusal (or an unreachable service) as a tool error the model can read:
    ``404 context.space.not_found: space not found``."""
    return CallToolResult(content=[TextContent(type="text", text=str(exc))], is_error=True)
