"""A LlamaIndex retriever over Context Ledger (``pip install 'context-ledger-client[llamaindex]'``).

Each query is one ``POST /api/v1/context/retrieve`` with the retriever's credential, so
authorisation, DLP, the budget and the evidence record apply as to any caller. A node is one
delivered chunk, in rank order (related code last), with the chunk's score as the node's score;
its metadata has the same keys as the LangChain documents' (``path``, ``lines``, ``symbol``,
``level``, ``score``, ``attribution_id``, ``request_id``, ...). The identifiers among them (ids,
score, tokens) and what would repeat (``start_line``/``end_line``, a title equal to the symbol,
keys without a value) are kept out of the text LlamaIndex puts in a prompt or embeds: a model
cites ``path`` and ``lines``, an application links with ``attribution_id``
(:meth:`ContextLedger.link`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # the optional extra is not installed
    raise ImportError(
        "context_ledger_client.llamaindex needs llama-index-core: "
        "pip install 'context-ledger-client[llamaindex]'"
    ) from exc

from context_ledger_client._metadata import IDENTIFIER_KEYS, chunk_metadata
from context_ledger_client.client import DEFAULT_CLIENT, AsyncContextLedger, ContextLedger
from context_ledger_client.models import RetrieveResult

#: Kept out of the prompt too: ``lines`` says them once.
_REPEATED_KEYS = ("start_line", "end_line")


def _repeats(key: str, value: object, metadata: dict[str, Any]) -> bool:
    """Whether the prompt would say nothing new with this key: no value, the line numbers again,
    or a code chunk's title, which is its symbol."""
    return (
        value in (None, "")
        or key in _REPEATED_KEYS
        or (key == "title" and value == metadata["symbol"])
    )


class ContextLedgerRetriever(BaseRetriever):
    """Nodes for a query from the spaces the credential may search.

    ``space_id`` (default: the organisation and personal spaces), ``token_budget``,
    ``max_per_level``, ``source_kinds`` and ``exclude_related`` are the retrieve call's fields.
    A client is opened per query, so the retriever holds no connection and works from any event
    loop.
    """

    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        space_id: str | None = None,
        token_budget: int | None = None,
        max_per_level: int | None = None,
        source_kinds: Sequence[str] | None = None,
        exclude_related: bool | None = None,
        client_name: str = DEFAULT_CLIENT,
        timeout: float = 30.0,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if not token:
            raise ValueError("a bearer credential is needed: a JWT or a ctxl_ API key")
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.base_url = base_url
        self._token = token  # not an attribute a repr or a serialiser would show
        self._fields: dict[str, Any] = {
            "space_id": space_id,
            "token_budget": token_budget,
            "max_per_level": max_per_level,
            "source_kinds": source_kinds,
            "exclude_related": exclude_related,
        }
        self._client_options: dict[str, Any] = {"client_name": client_name, "timeout": timeout}

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        with ContextLedger(self.base_url, self._token, **self._client_options) as client:
            return nodes_of(client.retrieve(query_bundle.query_str, **self._fields))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        async with AsyncContextLedger(self.base_url, self._token, **self._client_options) as client:
            return nodes_of(await client.retrieve(query_bundle.query_str, **self._fields))


def nodes_of(result: RetrieveResult) -> list[NodeWithScore]:
    """One scored node per delivered chunk, in the answer's order."""
    nodes = []
    for chunk in result.chunks:
        metadata = chunk_metadata(result, chunk)
        hidden = [
            key
            for key, value in metadata.items()
            if key in IDENTIFIER_KEYS or _repeats(key, value, metadata)
        ]
        node = TextNode(
            id_=chunk.id,
            text=chunk.content,
            metadata=metadata,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=hidden,
        )
        nodes.append(NodeWithScore(node=node, score=chunk.score))
    return nodes
