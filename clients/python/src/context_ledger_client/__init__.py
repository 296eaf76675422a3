"""Context Ledger's Python client: typed, sync and async, over httpx alone.

from context_ledger_client import ContextLedger

with ContextLedger("http://127.0.0.1:3000", token) as cl:
    answer = cl.retrieve("how are refunds authorised", token_budget=2000)
"""

from context_ledger_client._version import __version__
from context_ledger_client._wire import RetryPolicy
from context_ledger_client.client import DEFAULT_CLIENT, AsyncContextLedger, ContextLedger
from context_ledger_client.errors import (
    AuthenticationError,
    ContextLedgerError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    ServiceUnavailableError,
    ServiceUnreachableError,
    ValidationError,
)
from context_ledger_client.models import (
    Attribution,
    AttributionLink,
    Chunk,
    IndexReport,
    Memory,
    MemoryBatch,
    MemoryList,
    MemoryReembedding,
    MemoryRevision,
    NewMemory,
    PendingRevision,
    RankedMemory,
    RelevantMemories,
    RetrieveResult,
    SkippedFiles,
    Source,
    SourceSummary,
    Space,
    WrittenMemory,
)
from context_ledger_client.text import retrieval_table

__all__ = [
    "DEFAULT_CLIENT",
    "AsyncContextLedger",
    "Attribution",
    "AttributionLink",
    "AuthenticationError",
    "Chunk",
    "ContextLedger",
    "ContextLedgerError",
    "IndexReport",
    "Memory",
    "MemoryBatch",
    "MemoryList",
    "MemoryReembedding",
    "MemoryRevision",
    "NewMemory",
    "NotFoundError",
    "PendingRevision",
    "PermissionDeniedError",
    "RankedMemory",
    "RateLimitedError",
    "RelevantMemories",
    "RetrieveResult",
    "RetryPolicy",
    "ServiceUnavailableError",
    "ServiceUnreachableError",
    "SkippedFiles",
    "Source",
    "SourceSummary",
    "Space",
    "ValidationError",
    "WrittenMemory",
    "__version__",
    "retrieval_table",
]
