"""The MCP server: the four tools an agent uses (``retrieve_context``, ``search_memories``,
``add_memory``, ``link_response``) over the client package, so every call goes through the API
with the caller's credential (authorisation, DLP, budgets and the evidence record apply).

Two transports serve the same tools: stdio (``context-ledger mcp``, :mod:`.stdio`) with the
credential it is started with, and streamable HTTP in the ``McpFunction`` Lambda (:mod:`.http`),
stateless, with each request's own bearer credential (docs/mcp.md).
"""

from context_ledger import __version__

#: sent as ``X-Keystone-Client`` with every API call: the evidence record names the MCP server
CLIENT_NAME = f"context-ledger-mcp/{__version__}"
