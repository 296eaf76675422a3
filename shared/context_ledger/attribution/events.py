"""The attribution event: what a retrieval publishes to the queue and the writer appends.

Message body (JSON)::

    {"recordId": "<uuid>", "category": "context_attribution", "orgId": "<uuid>",
     "record": {"requestId": "...", "attributionId": "<uuid>", "userId": "...", "spaceId": "<uuid>",
                ...}}

``recordId`` is the idempotency key of the chain entry: the publisher makes it once per event, so
a redelivered or re-sent message never becomes a second entry. ``record`` may carry more fields
(lens, source ids, chunks, client); they are stored as sent, so they must be canonical-encodable:
no floats, integers within ±(2**53 - 1).
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from context_ledger.evidence.canonical import CanonicalEncodingError
from context_ledger.evidence.chain import ChainError, encode_entry, org_chain

CATEGORY = "context_attribution"

#: A team-memory chunk's metadata names its memory and accepted revision; the attribution
#: record of a retrieval copies both into the chunk's entry (spec: "for team memory chunks, the
#: entry and its accepted revision").
MEMORY_ID_KEY = "memoryId"
MEMORY_REVISION_KEY = "memoryRevision"
#: A memory chunk's metadata keys whose values are identifiers, not text: delivered as stored
#: (the memory API serves the memory's id, type and agent key as they are too).
MEMORY_IDENTIFIER_KEYS = frozenset({MEMORY_ID_KEY, MEMORY_REVISION_KEY, "memoryType", "agentKey"})


def memory_fields(chunk_metadata: dict[str, Any]) -> dict[str, Any]:
    """``{"memoryId", "memoryRevision"}`` of a memory chunk's entry, ``{}`` for any other chunk."""
    memory_id = chunk_metadata.get(MEMORY_ID_KEY)
    revision = chunk_metadata.get(MEMORY_REVISION_KEY)
    if isinstance(memory_id, str) and isinstance(revision, int):
        return {MEMORY_ID_KEY: memory_id, MEMORY_REVISION_KEY: revision}
    return {}


#: Every ``requestId`` the retrieve use case gives (:func:`new_request_id`). The model gateway
#: waits for a record only under an id of this shape or an ``attributionId`` (a UUID): no
#: record of any other id is ever on its way.
REQUEST_ID = re.compile(r"req_[0-9a-f]{32}")


def new_request_id() -> str:
    """A retrieval's ``requestId``."""
    return f"req_{uuid.uuid4().hex}"


class AttributionRecord(BaseModel):
    """The record of one retrieval; the named fields feed the ``attributions`` lookup row."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    request_id: str = Field(alias="requestId", min_length=1, max_length=128)
    attribution_id: uuid.UUID = Field(alias="attributionId")
    user_id: str = Field(alias="userId", min_length=1, max_length=255)
    space_id: uuid.UUID | None = Field(default=None, alias="spaceId")


class AttributionEvent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    record_id: uuid.UUID = Field(alias="recordId")
    category: Literal["context_attribution"]
    org_id: uuid.UUID = Field(alias="orgId")
    record: AttributionRecord

    @property
    def chain(self) -> str:
        return org_chain(self.org_id)

    def record_data(self) -> dict[str, Any]:
        """The record as stored in the chain: wire names, UUIDs in canonical lower-case form."""
        return self.record.model_dump(mode="json", by_alias=True, exclude_unset=True)

    @model_validator(mode="after")
    def _appendable(self) -> AttributionEvent:
        """Refuse here what the chain would refuse later, so a bad event is a poison message."""
        try:
            encode_entry(
                chain=self.chain,
                category=self.category,
                record_id=self.record_id,
                org_id=self.org_id,
                record=self.record_data(),
            )
        except (CanonicalEncodingError, ChainError) as exc:
            raise ValueError(str(exc)) from None
        return self
