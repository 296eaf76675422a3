"""The MCP tools' argument schemas carry the API's rules: each argument has the limits, enum,
pattern and default of the API field it is sent as, read from the API's own request models and
the served OpenAPI document, so the two cannot drift apart."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from api_support import run_coroutine

from context_ledger.http.attributions import LinkRequest
from context_ledger.http.memory import MAX_BATCH, CreateMemory
from context_ledger.http.openapi import openapi_document
from context_ledger.http.retrieve import RetrieveRequest
from context_ledger.mcp.tools import build_server
from context_ledger.memory.model import MEMORY_ID, PROJECT_KEY

RULES = ("type", "minLength", "maxLength", "minimum", "maximum", "pattern", "enum", "maxItems")


@cache
def tool_schemas() -> dict[str, dict[str, Any]]:
    tools = run_coroutine(build_server(lambda ctx: None).list_tools())
    return {tool.name: tool.input_schema for tool in tools}


def rules(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """What a value must be, whatever the schema's spelling: ``null`` alternatives, ``$ref``s to
    an enum, titles and descriptions left out."""
    variants = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    assert len(variants) == 1, schema
    (variant,) = variants
    if "$ref" in variant:
        variant = root["$defs"][variant["$ref"].rsplit("/", 1)[1]]
    found = {key: variant[key] for key in RULES if key in variant}
    if "items" in variant:
        found["items"] = rules(variant["items"], root)
    if "default" in schema:
        found["default"] = schema["default"]
    return found


def api_query_parameter(path: str, name: str) -> dict[str, Any]:
    (parameter,) = [
        p for p in openapi_document()["paths"][path]["get"]["parameters"] if p["name"] == name
    ]
    return parameter["schema"]


RETRIEVE = RetrieveRequest.model_json_schema()
CREATE_MEMORY = CreateMemory.model_json_schema()
LINK = LinkRequest.model_json_schema()
RELEVANT = "/api/context/{project_id}/relevant"

#: (tool, argument) -> (the API's schema of the field it is sent as, that schema's document)
SENT_AS = {
    ("retrieve_context", "query"): (RETRIEVE["properties"]["query"], RETRIEVE),
    ("retrieve_context", "token_budget"): (RETRIEVE["properties"]["tokenBudget"], RETRIEVE),
    ("retrieve_context", "max_per_level"): (RETRIEVE["properties"]["maxPerLevel"], RETRIEVE),
    ("retrieve_context", "source_kinds"): (RETRIEVE["properties"]["sourceKinds"], RETRIEVE),
    ("retrieve_context", "exclude_related"): (RETRIEVE["properties"]["excludeRelated"], RETRIEVE),
    ("retrieve_context", "session_id"): (RETRIEVE["properties"]["sessionId"], RETRIEVE),
    ("add_memory", "content"): (CREATE_MEMORY["properties"]["content"], CREATE_MEMORY),
    ("add_memory", "type"): (CREATE_MEMORY["properties"]["type"], CREATE_MEMORY),
    ("add_memory", "importance"): (CREATE_MEMORY["properties"]["importance"], CREATE_MEMORY),
    ("add_memory", "agent_key"): (CREATE_MEMORY["properties"]["agent_key"], CREATE_MEMORY),
    ("add_memory", "metadata"): (CREATE_MEMORY["properties"]["metadata"], CREATE_MEMORY),
    ("add_memory", "dedupe"): (CREATE_MEMORY["properties"]["dedupe"], CREATE_MEMORY),
    ("link_response", "response_id"): (LINK["properties"]["responseId"], LINK),
    ("search_memories", "query"): (api_query_parameter(RELEVANT, "query"), {}),
    ("search_memories", "limit"): (api_query_parameter(RELEVANT, "limit"), {}),
}


@pytest.mark.parametrize(("tool", "argument"), sorted(SENT_AS))
def test_each_argument_has_the_rules_of_the_api_field_it_is_sent_as(
    tool: str, argument: str
) -> None:
    schema = tool_schemas()[tool]
    api_schema, api_root = SENT_AS[(tool, argument)]

    mcp_rules = rules(schema["properties"][argument], schema)
    api_rules = rules(api_schema, api_root)
    if argument == "metadata":  # optional in the tool; absent and {} are the same to the API
        api_rules.pop("default", None)
        mcp_rules.pop("default")

    assert mcp_rules == api_rules


def test_every_argument_is_checked_above_or_is_a_path_segment() -> None:
    # Path segments: the space (any JSON value that is not a visible space's UUID is the API's
    # 404, so the tool leaves it to the API), the projects, the attribution id.
    unchecked = {
        ("retrieve_context", "space_id"),
        ("search_memories", "project"),
        ("search_memories", "memory_id"),
        ("add_memory", "project"),
        ("add_memory", "more"),  # checked item by item below
        ("link_response", "attribution_id"),
    }
    arguments = {
        (tool, name) for tool, schema in tool_schemas().items() for name in schema["properties"]
    }

    assert arguments == set(SENT_AS) | unchecked


def test_every_project_and_memory_id_has_the_apis_pattern() -> None:
    # A key or id that cannot exist is refused before it becomes a URL path (``a/b``, ``..``):
    # a write with another key is the API's 422, and the tool says so for a read too.
    for tool in ("add_memory", "search_memories"):
        assert tool_schemas()[tool]["properties"]["project"]["pattern"] == PROJECT_KEY.pattern
    memory_id = tool_schemas()["search_memories"]["properties"]["memory_id"]["anyOf"][0]
    assert memory_id["pattern"] == MEMORY_ID.pattern


@pytest.mark.parametrize("argument", ["content", "type", "importance", "agent_key", "metadata"])
def test_each_further_memory_has_the_rules_of_a_single_write(argument: str) -> None:
    schema = tool_schemas()["add_memory"]
    more = schema["$defs"]["MoreMemory"]
    api_rules = rules(CREATE_MEMORY["properties"][argument], CREATE_MEMORY)
    mcp_rules = rules(more["properties"][argument], schema)
    if argument == "metadata":
        api_rules.pop("default", None)
        mcp_rules.pop("default")

    assert mcp_rules == api_rules
    assert more["additionalProperties"] is False


def test_one_call_holds_at_most_a_batch() -> None:
    more = tool_schemas()["add_memory"]["properties"]["more"]["anyOf"][0]

    assert more["maxItems"] == MAX_BATCH - 1
