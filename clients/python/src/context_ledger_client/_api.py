"""Every API call of the client, built once for both clients: paths, bodies, which calls are
idempotent (see ``_wire.RetryPolicy``) and how each answer is read."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from context_ledger_client import folder
from context_ledger_client._wire import (
    Call,
    Flow,
    RetryPolicy,
    Sleep,
    drop_none,
    no_content,
    perform,
)
from context_ledger_client.errors import ContextLedgerError, NotFoundError
from context_ledger_client.models import (
    Attribution,
    IndexReport,
    Memory,
    MemoryBatch,
    MemoryList,
    MemoryReembedding,
    MemoryRevision,
    NewMemory,
    PendingRevision,
    RelevantMemories,
    RetrieveResult,
    SkippedFiles,
    Source,
    Space,
    WrittenMemory,
)

CONTEXT = "/api/v1/context"
#: JSON bytes per document batch: well under the index endpoint's 6 MB body limit
DEFAULT_BATCH_BYTES = 2_000_000
#: documents per batch (the endpoint takes 10,000; smaller batches report progress more often)
MAX_BATCH_DOCUMENTS = 500

Progress = Callable[[int, int], None]


def _seg(value: str) -> str:
    """A path segment: ids and project keys are the caller's strings, never path syntax."""
    return quote(str(value), safe="")


# --- retrieval and attribution --------------------------------------------------------------


def retrieve(
    query: str,
    *,
    space_id: str | None,
    token_budget: int | None,
    max_per_level: int | None,
    source_kinds: Sequence[str] | None,
    exclude_related: bool | None,
    lens_id: str | None,
    session_id: str | None,
) -> Call[RetrieveResult]:
    body = drop_none(
        {
            "query": query,
            "spaceId": space_id,
            "tokenBudget": token_budget,
            "maxPerLevel": max_per_level,
            "sourceKinds": list(source_kinds) if source_kinds is not None else None,
            "excludeRelated": exclude_related,
            "lensId": lens_id,
            "sessionId": session_id,
        }
    )
    # Read-only: sending it again after a 503 only records a second attribution of a retrieval
    # that was not delivered the first time.
    return Call("POST", f"{CONTEXT}/retrieve", RetrieveResult.from_json, body, idempotent=True)


def attribution(attribution_id: str) -> Call[Attribution]:
    path = f"{CONTEXT}/attribution/{_seg(attribution_id)}"
    return Call("GET", path, Attribution.from_json, idempotent=True)


def attributions(request_id: str) -> Call[tuple[Attribution, ...]]:
    path = f"{CONTEXT}/attributions/{_seg(request_id)}"
    return Call("GET", path, _records, idempotent=True)


def _records(data: Mapping[str, Any]) -> tuple[Attribution, ...]:
    return tuple(Attribution.from_json(r) for r in data["records"])


def wait_for_attribution(
    attribution_id: str, *, timeout: float, retry: RetryPolicy
) -> Flow[Attribution]:
    """The record, asking again while it answers 404: the writer records asynchronously."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return (yield from perform(attribution(attribution_id), retry))
        except NotFoundError:
            if time.monotonic() + 0.25 > deadline:
                raise
            yield Sleep(0.25)


def link(attribution_id: str, response_id: str) -> Call[None]:
    path = f"{CONTEXT}/attributions/{_seg(attribution_id)}/links"
    body = {"responseId": response_id}
    return Call("POST", path, no_content, body, idempotent=True)  # the API says: idempotent


# --- spaces and sources ---------------------------------------------------------------------


def create_space(name: str, *, level: str, parent_id: str | None) -> Call[Space]:
    body = drop_none({"name": name, "level": level, "parentId": parent_id})
    return Call("POST", f"{CONTEXT}/spaces", Space.from_json, body)


def spaces() -> Call[tuple[Space, ...]]:
    return Call("GET", f"{CONTEXT}/spaces", _spaces, idempotent=True)


def _spaces(data: Mapping[str, Any]) -> tuple[Space, ...]:
    return tuple(Space.from_json(s) for s in data["spaces"])


def space(space_id: str) -> Call[Space]:
    return Call("GET", f"{CONTEXT}/spaces/{_seg(space_id)}", Space.from_json, idempotent=True)


def grant(space_id: str, subject: str, permissions: Sequence[str]) -> Call[None]:
    body = {"subject": subject, "permissions": list(permissions)}
    path = f"{CONTEXT}/spaces/{_seg(space_id)}/grants"
    return Call("PUT", path, no_content, body, idempotent=True)


def create_source(
    space_id: str, name: str, *, kind: str, classification: str | None
) -> Call[Source]:
    body = drop_none({"name": name, "kind": kind, "classification": classification})
    return Call("POST", f"{CONTEXT}/spaces/{_seg(space_id)}/sources", Source.from_json, body)


def sources(space_id: str) -> Call[tuple[Source, ...]]:
    path = f"{CONTEXT}/spaces/{_seg(space_id)}/sources"
    return Call("GET", path, _sources, idempotent=True)


def _sources(data: Mapping[str, Any]) -> tuple[Source, ...]:
    return tuple(Source.from_json(s) for s in data["sources"])


def index_folder(
    source_id: str,
    root: Path,
    *,
    max_file_bytes: int,
    batch_bytes: int,
    progress: Progress | None,
    retry: RetryPolicy,
) -> Flow[IndexReport]:
    """A new index build of the source from the folder's files, in batches, then published: the
    same three endpoints ``context-ledger ingest`` uses, so searches switch to the new snapshot at
    once and a failure leaves the previous one served. ``progress(done, total)`` counts files
    (sent or skipped) after each stored batch."""
    base = f"{CONTEXT}/sources/{_seg(source_id)}/index-versions"
    version = yield from perform(Call("POST", base, lambda d: int(d["version"])), retry)
    build = f"{base}/{version}"
    try:
        return (
            yield from _fill_and_publish(
                build, version, root, max_file_bytes, batch_bytes, progress, retry
            )
        )
    except Exception as exc:
        # Nothing half-built stays behind: the build's rows are deleted, the published version
        # stays served (the abort endpoint; a build left open would stay "building" for ever).
        try:
            yield from perform(Call("POST", f"{build}/abort", _body), retry)
        except ContextLedgerError as abort_failed:
            exc.add_note(f"index version {version} could not be aborted: {abort_failed}")
        else:
            exc.add_note(f"index version {version} aborted; the published version is unchanged")
        raise


def _fill_and_publish(
    build: str,
    version: int,
    root: Path,
    max_file_bytes: int,
    batch_bytes: int,
    progress: Progress | None,
    retry: RetryPolicy,
) -> Flow[IndexReport]:
    """The open build's document batches, then its publication."""
    paths = folder.list_files(root)
    skips = folder.Skips()
    files = sent_bytes = 0
    for documents, size, done in _batches(
        folder.read_files(root, paths, max_bytes=max_file_bytes, skips=skips), batch_bytes
    ):
        if documents:
            # Idempotent: a path sent again in the same build replaces its chunks.
            batch = Call(
                "POST",
                f"{build}/documents",
                _body,
                {"documents": documents},
                idempotent=True,
            )
            stats = yield from perform(batch, retry)
            files += stats["documents"]
            sent_bytes += size
        if progress is not None:
            progress(done, len(paths))
    published = yield from perform(Call("POST", f"{build}/publish", _body), retry)
    return IndexReport(
        version=version,
        files=files,
        bytes=sent_bytes,
        chunks=published["chunks"],
        tokens=published["tokens"],
        edges=published["edges"],
        embedded=published["embedded"],
        skipped=SkippedFiles(
            skips.binary, skips.too_large, skips.unreadable, skips.bad_name, tuple(skips.paths)
        ),
    )


def _body(data: dict[str, Any]) -> dict[str, Any]:
    return data


def _batches(
    files: Iterable[tuple[str, str | None]], batch_bytes: int
) -> Iterator[tuple[list[dict[str, str]], int, int]]:
    """(documents, their JSON bytes, files handled so far) per request body under
    ``batch_bytes``; the last one may hold no document (only skipped files after the last)."""
    batch: list[dict[str, str]] = []
    size = done = 0
    for path, text in files:
        if text is not None:
            document = {"path": path, "content": text}
            doc_size = len(json.dumps(document))
            if batch and (size + doc_size > batch_bytes or len(batch) >= MAX_BATCH_DOCUMENTS):
                yield batch, size, done
                batch, size = [], 0
            batch.append(document)
            size += doc_size
        done += 1
    yield batch, size, done


# --- memory API -------------------------------------------------------------------------------


def write_memory(project: str, memory: NewMemory) -> Call[WrittenMemory | PendingRevision]:
    return Call("POST", f"/api/context/{_seg(project)}", _written, memory.to_json())


def _written(data: Mapping[str, Any]) -> WrittenMemory | PendingRevision:
    if data.get("state") == "pending":
        return PendingRevision.from_json(data)
    return WrittenMemory.from_json(data)


def write_memories(project: str, memories: Sequence[NewMemory]) -> Call[MemoryBatch]:
    body = {"memories": [memory.to_json() for memory in memories]}
    return Call("POST", f"/api/context/{_seg(project)}/batch", MemoryBatch.from_json, body)


def reembed_memories(project: str | None, limit: int | None) -> Call[MemoryReembedding]:
    """One step of re-embedding the memories of another model (an operator route)."""
    body = drop_none({"projectId": project, "limit": limit})
    return Call("POST", "/api/v1/context/memories/reembed", MemoryReembedding.from_json, body)


def memory(project: str, memory_id: str) -> Call[Memory]:
    path = f"/api/context/{_seg(project)}/{_seg(memory_id)}"
    return Call("GET", path, Memory.from_json, idempotent=True)


def memories(
    project: str,
    *,
    type: str | None,
    agent: str | None,
    q: str | None,
    limit: int | None,
    offset: int | None,
) -> Call[MemoryList]:
    params = drop_none({"type": type, "agent": agent, "q": q, "limit": limit, "offset": offset})
    path = f"/api/context/{_seg(project)}"
    return Call("GET", path, MemoryList.from_json, params=params, idempotent=True)


def relevant_memories(
    project: str,
    query: str,
    *,
    limit: int | None,
    min_score: float | None,
    token_budget: int | None,
) -> Call[RelevantMemories]:
    params = drop_none(
        {"query": query, "limit": limit, "min_score": min_score, "token_budget": token_budget}
    )
    path = f"/api/context/{_seg(project)}/relevant"
    return Call("GET", path, RelevantMemories.from_json, params=params, idempotent=True)


def memory_revisions(project: str, memory_id: str) -> Call[tuple[MemoryRevision, ...]]:
    path = f"/api/context/{_seg(project)}/{_seg(memory_id)}/revisions"
    return Call("GET", path, _revisions, idempotent=True)


def _revisions(data: Mapping[str, Any]) -> tuple[MemoryRevision, ...]:
    return tuple(MemoryRevision.from_json(r) for r in data["revisions"])
