"""A LangChain retriever over Context Ledger (``pip install 'context-ledger-client[langchain]'``).

Each query is one ``POST /api/v1/context/retrieve`` with the retriever's credential, so
authorisation, DLP, the budget and the evidence record apply as to any caller. A document is one
delivered chunk, in rank order (related code last); its metadata carries where it came from
(``path``, ``lines``, ``start_line``, ``end_line``, ``symbol``, ``level``, ``kind``, ...), its
``score`` and ``tokens``, and the retrieval's ``attribution_id`` and ``request_id``, so an
application can cite the chunk and link its answer to the retrieval
(:meth:`ContextLedger.link`).
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # the optional extra is not installed
    raise ImportError(
        "context_ledger_client.langchain needs langchain-core: "
        "pip install 'context-ledger-client[langchain]'"
    ) from exc
from pydantic import SecretStr

from context_ledger_client._metadata import chunk_metadata
from context_ledger_client.client import DEFAULT_CLIENT, AsyncContextLedger, ContextLedger
from context_ledger_client.models import RetrieveResult


class ContextLedgerRetriever(BaseRetriever):
    """Documents for a query from the spaces the credential may search.

    ``space_id`` (default: the organisation and personal spaces), ``token_budget``,
    ``max_per_level``, ``source_kinds`` and ``exclude_related`` are the retrieve call's fields.
    """

    base_url: str
    token: SecretStr
    space_id: str | None = None
    token_budget: int | None = None
    max_per_level: int | None = None
    source_kinds: list[str] | None = None
    exclude_related: bool | None = None
    client_name: str = DEFAULT_CLIENT
    timeout: float = 30.0

    def _fields(self) -> dict[str, Any]:
        return {
            "space_id": self.space_id,
            "token_budget": self.token_budget,
            "max_per_level": self.max_per_level,
            "source_kinds": self.source_kinds,
            "exclude_related": self.exclude_related,
        }

    def _client_options(self) -> dict[str, Any]:
        return {"client_name": self.client_name, "timeout": self.timeout}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        token = self.token.get_secret_value()
        with ContextLedger(self.base_url, token, **self._client_options()) as client:
            return documents_of(client.retrieve(query, **self._fields()))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        token = self.token.get_secret_value()
        async with AsyncContextLedger(self.base_url, token, **self._client_options()) as client:
            return documents_of(await client.retrieve(query, **self._fields()))


def documents_of(result: RetrieveResult) -> list[Document]:
    """One document per delivered chunk, in the answer's order."""
    return [
        Document(id=chunk.id, page_content=chunk.content, metadata=chunk_metadata(result, chunk))
        for chunk in result.chunks
    ]
