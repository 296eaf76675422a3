"""The clients: :class:`ContextLedger` (sync) and :class:`AsyncContextLedger` (asyncio).

Both take the service's base URL and a bearer credential (a JWT or a ``ctxl_`` API key); every
call goes through the API with that credential, so authorisation, DLP, budgets and the evidence
record apply as to any caller. The methods of the two are the same, one line each: the requests
they make, their retries and how answers are read are built once in ``_api`` and ``_wire``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from context_ledger_client import _api
from context_ledger_client._version import __version__
from context_ledger_client._wire import Call, Flow, RetryPolicy, Sleep, perform
from context_ledger_client.errors import ServiceUnreachableError
from context_ledger_client.folder import DEFAULT_MAX_FILE_BYTES
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
    Source,
    Space,
    WrittenMemory,
)

DEFAULT_CLIENT = f"context-ledger-client/{__version__}"
DEFAULT_TIMEOUT = 30.0

T = TypeVar("T")


class _Config:
    """What both clients are made of: where, as whom, and the retry rule."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        client_name: str,
        timeout: float | httpx.Timeout,
        retry: RetryPolicy | None,
    ) -> None:
        if not token:
            raise ValueError("a bearer credential is needed: a JWT or a ctxl_ API key")
        self.base_url = base_url.rstrip("/")
        self.retry = retry if retry is not None else RetryPolicy()
        # The evidence record names the client from this header (recorded, never trusted).
        self._headers = {
            "Authorization": f"Bearer {token}",
            "X-Keystone-Client": client_name,
            "User-Agent": client_name,
        }
        self._timeout = timeout

    def _unreachable(self, exc: httpx.TransportError) -> ServiceUnreachableError:
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, httpx.TimeoutException):
            reason = f"no answer in time ({type(exc).__name__})"
        error = ServiceUnreachableError(self.base_url, reason)
        error.__suppress_context__ = True  # the httpx error is an implementation detail
        return error


class ContextLedger(_Config):
    """The synchronous client; use it as a context manager, or call :meth:`close`.

    ``client_name`` is sent as ``X-Keystone-Client`` (``name/version``); ``timeout`` applies to
    each request; ``retry`` says which refusals are sent again (see :class:`RetryPolicy`).
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        client_name: str = DEFAULT_CLIENT,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(base_url, token, client_name=client_name, timeout=timeout, retry=retry)
        self._http = httpx.Client(base_url=self.base_url, headers=self._headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, flow: Flow[T]) -> T:
        try:
            step: Call[Any] | Sleep = next(flow)
            while True:
                if isinstance(step, Sleep):
                    time.sleep(step.seconds)
                    step = flow.send(None)
                    continue
                request = self._http.build_request(
                    step.method, step.path, json=step.json, params=step.params
                )
                try:
                    response = self._http.send(request)
                except httpx.TransportError as exc:
                    # into the flow, so a multi-step call can clean up (an index build aborts)
                    step = flow.throw(self._unreachable(exc))
                    continue
                step = flow.send(response)
        except StopIteration as stop:
            return stop.value

    def _do(self, call: Call[T]) -> T:
        return self._run(perform(call, self.retry))

    # --- retrieval and attribution -------------------------------------------------------

    def retrieve(
        self,
        query: str,
        *,
        space_id: str | None = None,
        token_budget: int | None = None,
        max_per_level: int | None = None,
        source_kinds: Sequence[str] | None = None,
        exclude_related: bool | None = None,
        lens_id: str | None = None,
        session_id: str | None = None,
    ) -> RetrieveResult:
        """Ranked, budgeted chunks for ``query`` from the spaces the caller may search (without
        ``space_id``: the organisation space and the caller's personal one)."""
        return self._do(
            _api.retrieve(
                query,
                space_id=space_id,
                token_budget=token_budget,
                max_per_level=max_per_level,
                source_kinds=source_kinds,
                exclude_related=exclude_related,
                lens_id=lens_id,
                session_id=session_id,
            )
        )

    def attribution(self, attribution_id: str) -> Attribution:
        """The evidence record of a retrieval, by the ``attribution_id`` it returned."""
        return self._do(_api.attribution(attribution_id))

    def attributions(self, request_id: str) -> tuple[Attribution, ...]:
        """The records of one retrieval request (by its ``request_id``)."""
        return self._do(_api.attributions(request_id))

    def wait_for_attribution(self, attribution_id: str, *, timeout: float = 15.0) -> Attribution:
        """:meth:`attribution`, asking again for up to ``timeout`` seconds while it is not
        found: the record is written asynchronously after the retrieval."""
        return self._run(
            _api.wait_for_attribution(attribution_id, timeout=timeout, retry=self.retry)
        )

    def link(self, attribution_id: str, response_id: str) -> None:
        """Record that the AI response ``response_id`` used the retrieval (idempotent)."""
        self._do(_api.link(attribution_id, response_id))

    # --- spaces and sources ------------------------------------------------------------

    def create_space(self, name: str, *, level: str, parent_id: str | None = None) -> Space:
        """A space at ``level`` under ``parent_id`` (none: under the organisation space)."""
        return self._do(_api.create_space(name, level=level, parent_id=parent_id))

    def spaces(self) -> tuple[Space, ...]:
        """The spaces the caller can see."""
        return self._do(_api.spaces())

    def space(self, space_id: str) -> Space:
        return self._do(_api.space(space_id))

    def grant(self, space_id: str, subject: str, permissions: Sequence[str]) -> None:
        """Set ``subject``'s (``user:<id>`` or ``group:<name>``) permissions on the space."""
        self._do(_api.grant(space_id, subject, permissions))

    def create_source(
        self, space_id: str, name: str, *, kind: str, classification: str | None = None
    ) -> Source:
        """A source of ``kind`` in the space; ``classification`` defaults to ``internal``."""
        return self._do(
            _api.create_source(space_id, name, kind=kind, classification=classification)
        )

    def sources(self, space_id: str) -> tuple[Source, ...]:
        return self._do(_api.sources(space_id))

    def index_folder(
        self,
        source_id: str,
        path: str | Path,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        batch_bytes: int = _api.DEFAULT_BATCH_BYTES,
        progress: _api.Progress | None = None,
    ) -> IndexReport:
        """Index a folder's text files as the source's new published version (see
        ``context_ledger_client.folder`` for what is skipped); ``progress(done, total)``."""
        return self._run(
            _api.index_folder(
                source_id,
                Path(path),
                max_file_bytes=max_file_bytes,
                batch_bytes=batch_bytes,
                progress=progress,
                retry=self.retry,
            )
        )

    # --- memory API --------------------------------------------------------------------

    def write_memory(
        self,
        project: str,
        content: str,
        *,
        type: str | None = None,
        agent_key: str | None = None,
        confidence: float | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        dedupe: bool | None = None,
    ) -> WrittenMemory | PendingRevision:
        """Store a memory in project ``project`` (its key; the first write creates it). With
        review required, the answer is the pending revision. With ``dedupe``, a live memory of
        the same type whose content is the same (whitespace and case folded) is the answer
        instead, unchanged, with ``duplicate`` True."""
        memory = NewMemory(
            content,
            type=type,
            agent_key=agent_key,
            confidence=confidence,
            importance=importance,
            metadata=metadata,
            dedupe=dedupe,
        )
        return self._do(_api.write_memory(project, memory))

    def write_memories(self, project: str, memories: Sequence[NewMemory]) -> MemoryBatch:
        """Up to 100 memories in one call, all stored or none (one transaction, one embeddings
        request); the ids come back in the items' order. Not sent again after a 503."""
        return self._do(_api.write_memories(project, memories))

    def memory(self, project: str, memory_id: str) -> Memory:
        """One memory as the list serves it."""
        return self._do(_api.memory(project, memory_id))

    def memories(
        self,
        project: str,
        *,
        type: str | None = None,
        agent: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> MemoryList:
        """The project's memories, newest first (``q``: a substring filter, not a ranking)."""
        return self._do(
            _api.memories(project, type=type, agent=agent, q=q, limit=limit, offset=offset)
        )

    def relevant_memories(
        self,
        project: str,
        query: str = "",
        *,
        limit: int | None = None,
        min_score: float | None = None,
        token_budget: int | None = None,
    ) -> RelevantMemories:
        """The memories to build a prompt from, ranked by score (no floor unless ``min_score``)."""
        return self._do(
            _api.relevant_memories(
                project, query, limit=limit, min_score=min_score, token_budget=token_budget
            )
        )

    def memory_revisions(self, project: str, memory_id: str) -> tuple[MemoryRevision, ...]:
        return self._do(_api.memory_revisions(project, memory_id))

    def reembed_memories(
        self, *, project: str | None = None, limit: int | None = None
    ) -> MemoryReembedding:
        """Re-embed up to ``limit`` memories (of ``project``, else of every project the
        credential administers) whose vector is of another model than the service's."""
        return self._do(_api.reembed_memories(project, limit))


class AsyncContextLedger(_Config):
    """The asyncio client: the same methods as :class:`ContextLedger`, awaited; use it as an
    async context manager, or await :meth:`aclose`."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        client_name: str = DEFAULT_CLIENT,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(base_url, token, client_name=client_name, timeout=timeout, retry=retry)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self._headers, timeout=timeout
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self, flow: Flow[T]) -> T:
        try:
            step: Call[Any] | Sleep = next(flow)
            while True:
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                    step = flow.send(None)
                    continue
                request = self._http.build_request(
                    step.method, step.path, json=step.json, params=step.params
                )
                try:
                    response = await self._http.send(request)
                except httpx.TransportError as exc:
                    # into the flow, so a multi-step call can clean up (an index build aborts)
                    step = flow.throw(self._unreachable(exc))
                    continue
                step = flow.send(response)
        except StopIteration as stop:
            return stop.value

    async def _do(self, call: Call[T]) -> T:
        return await self._run(perform(call, self.retry))

    # --- retrieval and attribution -------------------------------------------------------

    async def retrieve(
        self,
        query: str,
        *,
        space_id: str | None = None,
        token_budget: int | None = None,
        max_per_level: int | None = None,
        source_kinds: Sequence[str] | None = None,
        exclude_related: bool | None = None,
        lens_id: str | None = None,
        session_id: str | None = None,
    ) -> RetrieveResult:
        """See :meth:`ContextLedger.retrieve`."""
        return await self._do(
            _api.retrieve(
                query,
                space_id=space_id,
                token_budget=token_budget,
                max_per_level=max_per_level,
                source_kinds=source_kinds,
                exclude_related=exclude_related,
                lens_id=lens_id,
                session_id=session_id,
            )
        )

    async def attribution(self, attribution_id: str) -> Attribution:
        return await self._do(_api.attribution(attribution_id))

    async def attributions(self, request_id: str) -> tuple[Attribution, ...]:
        return await self._do(_api.attributions(request_id))

    async def wait_for_attribution(
        self, attribution_id: str, *, timeout: float = 15.0
    ) -> Attribution:
        """See :meth:`ContextLedger.wait_for_attribution`."""
        return await self._run(
            _api.wait_for_attribution(attribution_id, timeout=timeout, retry=self.retry)
        )

    async def link(self, attribution_id: str, response_id: str) -> None:
        await self._do(_api.link(attribution_id, response_id))

    # --- spaces and sources ------------------------------------------------------------

    async def create_space(self, name: str, *, level: str, parent_id: str | None = None) -> Space:
        return await self._do(_api.create_space(name, level=level, parent_id=parent_id))

    async def spaces(self) -> tuple[Space, ...]:
        return await self._do(_api.spaces())

    async def space(self, space_id: str) -> Space:
        return await self._do(_api.space(space_id))

    async def grant(self, space_id: str, subject: str, permissions: Sequence[str]) -> None:
        await self._do(_api.grant(space_id, subject, permissions))

    async def create_source(
        self, space_id: str, name: str, *, kind: str, classification: str | None = None
    ) -> Source:
        return await self._do(
            _api.create_source(space_id, name, kind=kind, classification=classification)
        )

    async def sources(self, space_id: str) -> tuple[Source, ...]:
        return await self._do(_api.sources(space_id))

    async def index_folder(
        self,
        source_id: str,
        path: str | Path,
        *,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        batch_bytes: int = _api.DEFAULT_BATCH_BYTES,
        progress: _api.Progress | None = None,
    ) -> IndexReport:
        """See :meth:`ContextLedger.index_folder` (files are read between the awaits)."""
        return await self._run(
            _api.index_folder(
                source_id,
                Path(path),
                max_file_bytes=max_file_bytes,
                batch_bytes=batch_bytes,
                progress=progress,
                retry=self.retry,
            )
        )

    # --- memory API --------------------------------------------------------------------

    async def write_memory(
        self,
        project: str,
        content: str,
        *,
        type: str | None = None,
        agent_key: str | None = None,
        confidence: float | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        dedupe: bool | None = None,
    ) -> WrittenMemory | PendingRevision:
        """See :meth:`ContextLedger.write_memory`."""
        memory = NewMemory(
            content,
            type=type,
            agent_key=agent_key,
            confidence=confidence,
            importance=importance,
            metadata=metadata,
            dedupe=dedupe,
        )
        return await self._do(_api.write_memory(project, memory))

    async def write_memories(self, project: str, memories: Sequence[NewMemory]) -> MemoryBatch:
        """See :meth:`ContextLedger.write_memories`."""
        return await self._do(_api.write_memories(project, memories))

    async def memory(self, project: str, memory_id: str) -> Memory:
        return await self._do(_api.memory(project, memory_id))

    async def memories(
        self,
        project: str,
        *,
        type: str | None = None,
        agent: str | None = None,
        q: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
    ) -> MemoryList:
        return await self._do(
            _api.memories(project, type=type, agent=agent, q=q, limit=limit, offset=offset)
        )

    async def relevant_memories(
        self,
        project: str,
        query: str = "",
        *,
        limit: int | None = None,
        min_score: float | None = None,
        token_budget: int | None = None,
    ) -> RelevantMemories:
        return await self._do(
            _api.relevant_memories(
                project, query, limit=limit, min_score=min_score, token_budget=token_budget
            )
        )

    async def memory_revisions(self, project: str, memory_id: str) -> tuple[MemoryRevision, ...]:
        return await self._do(_api.memory_revisions(project, memory_id))

    async def reembed_memories(
        self, *, project: str | None = None, limit: int | None = None
    ) -> MemoryReembedding:
        """See :meth:`ContextLedger.reembed_memories`."""
        return await self._do(_api.reembed_memories(project, limit))
