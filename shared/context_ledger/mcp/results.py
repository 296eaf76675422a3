"""What the tools answer: text for the model, and structured output for the agent's code.

The text is what an LLM reads and cites: each chunk numbered, with its path and lines, symbol,
level, score and tokens, related code marked with the ranked chunk it relates to, the content in
a fence; then what to do with the ids. The structured output carries the ids and the citation
fields under the API's own names (camelCase for retrieval, snake_case for the memory API), not
the contents again: those are in the text.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from context_ledger.dlp.texts import redacted
from context_ledger_client import (
    Chunk,
    Memory,
    MemoryBatch,
    PendingRevision,
    RelevantMemories,
    RetrieveResult,
    WrittenMemory,
)

#: how each relation reads from the related chunk's side ("[1] calls this")
_RELATION = {
    "calls": "[{anchor}] calls this",
    "called_by": "this calls [{anchor}]",
    "tested_by": "this tests [{anchor}]",
}
_BACKTICKS = re.compile(r"`{3,}")


class _CamelModel(BaseModel):
    """The context API's names on the wire (``requestId``), Python's in code."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class CitedChunk(_CamelModel):
    """A delivered chunk without its content: what citing it and finding it again take."""

    id: str
    path: str
    lines: str
    symbol: str | None
    title: str | None
    level: str
    kind: str
    score: float
    tokens: int
    source_id: str
    related_to: str | None = None
    related_relation: str | None = None


class RetrieveOutput(_CamelModel):
    request_id: str
    attribution_id: str
    tokens_used: int
    search_mode: str
    warnings: list[str]
    chunks: list[CitedChunk]


class FoundMemory(BaseModel):
    """A recalled memory; a memory read by its id has no score, similarity or justification."""

    id: str
    type: str
    content: str
    score: float | None
    similarity: float | None
    importance: float
    confidence: float
    agent_key: str | None
    justification: str | None
    metadata: dict[str, Any]


class SearchMemoriesOutput(BaseModel):
    project_id: str
    query: str
    memories: list[FoundMemory]


class AddMemoryOutput(BaseModel):
    """The first memory's id and state; ``ids`` every memory's in order (one per item of
    ``more`` after the first), ``duplicates`` and ``pending`` positions in ``ids``."""

    id: str
    project_id: str
    #: ``accepted``: served from now on; ``pending``: waits for an administrator's review
    state: Literal["accepted", "pending"]
    revision: int | None
    #: with dedupe: the first memory was already stored, nothing new was
    duplicate: bool = False
    ids: list[str]
    duplicates: list[int] = []
    pending: list[int] = []


class LinkOutput(_CamelModel):
    attribution_id: str
    request_id: str
    response_id: str


def retrieval(query: str, result: RetrieveResult) -> tuple[str, RetrieveOutput]:
    """The answer in words, naming the query as the service searched it: redacted by the
    built-in detectors, so a key pasted into a question is not written back into the agent's
    context, transcript or logs by the tool result."""
    query = redacted((), query, stage="query")
    chunks = result.chunks
    number = {chunk.id: index for index, chunk in enumerate(chunks, 1)}
    ids = f"requestId {result.request_id}, attributionId {result.attribution_id}"
    if chunks:
        count = f"{len(chunks)} chunk{'s' if len(chunks) > 1 else ''}"
        lines = [
            f'{count} for "{query}" ({result.tokens_used} tokens, {result.search_mode} search). '
            "Cite a chunk by its path and lines.",
            f"{ids}: once your answer uses this context, call link_response with this "
            "attributionId and the answer's id.",
        ]
    else:
        lines = [
            f'No chunk for "{query}" in the spaces you may search ({result.search_mode} search).',
            f"{ids}.",
        ]
    lines += [f"warning: {warning}" for warning in result.warnings]
    for index, chunk in enumerate(chunks, 1):
        lines += ["", f"[{index}] {_heading(chunk, number)}", _fenced(chunk)]
    output = RetrieveOutput(
        request_id=result.request_id,
        attribution_id=result.attribution_id,
        tokens_used=result.tokens_used,
        search_mode=result.search_mode,
        warnings=list(result.warnings),
        chunks=[_cited(chunk) for chunk in chunks],
    )
    return "\n".join(lines), output


def _one_line(text: str) -> str:
    """``text`` with line breaks and other unprintable characters escaped (``\\n``): a path or
    a heading is the source's data, and must not start a line that reads as another chunk's."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _heading(chunk: Chunk, number: dict[str, int]) -> str:
    place = _one_line(chunk.path) + (f":{chunk.lines}" if chunk.lines else "")
    label = chunk.symbol or chunk.title
    name = f" ({_one_line(label)})" if label else ""
    if chunk.related_to is None:
        return f"{place}{name} | {chunk.level} | score {chunk.score:.3f} | {chunk.tokens} tokens"
    anchor = number.get(chunk.related_to, chunk.related_to)
    relation = _RELATION.get(chunk.related_relation or "", "related to [{anchor}]")
    return (
        f"related code, {relation.format(anchor=anchor)}: {place}{name} | {chunk.level} | "
        f"{chunk.tokens} tokens"
    )


def _fenced(chunk: Chunk) -> str:
    """The content in a fence longer than any backtick run inside it, so it cannot close early."""
    longest = max((len(run) for run in _BACKTICKS.findall(chunk.content)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{chunk.language or ''}\n{chunk.content.rstrip()}\n{fence}"


def _cited(chunk: Chunk) -> CitedChunk:
    return CitedChunk(
        id=chunk.id,
        path=chunk.path,
        lines=chunk.lines,
        symbol=chunk.symbol,
        title=chunk.title,
        level=chunk.level,
        kind=chunk.kind,
        score=chunk.score,
        tokens=chunk.tokens,
        source_id=chunk.source_id,
        related_to=chunk.related_to,
        related_relation=chunk.related_relation,
    )


def memories(found: RelevantMemories) -> tuple[str, SearchMemoriesOutput]:
    """The recalled memories in words and structured, naming the query redacted (as
    :func:`retrieval` does)."""
    ranked = found.memories
    query = redacted((), found.query, stage="query")
    count = f"{len(ranked)} memor{'ies' if len(ranked) != 1 else 'y'}"
    lines = [f'{count} of project {found.project_id} for "{query}", best first']
    for index, memory in enumerate(ranked, 1):
        heading = f"[{index}] {memory.type} | score {memory.score:.3f} | importance"
        lines += ["", *_memory_lines(memory, heading, with_id=True)]
    output = SearchMemoriesOutput(
        project_id=found.project_id,
        query=query,
        memories=[
            _found(m, score=m.score, similarity=m.similarity, justification=m.justification)
            for m in ranked
        ],
    )
    return "\n".join(lines), output


def one_memory(memory: Memory) -> tuple[str, SearchMemoriesOutput]:
    """A memory read by its id: the same shape as a search's answer, without a score."""
    lines = [
        f"Memory {memory.id} of project {memory.project_id}",
        "",
        *_memory_lines(memory, f"{memory.type} | importance", with_id=False),
    ]
    output = SearchMemoriesOutput(
        project_id=memory.project_id,
        query="",
        memories=[_found(memory, score=None, similarity=None, justification=None)],
    )
    return "\n".join(lines), output


def _memory_lines(memory: Memory, heading: str, *, with_id: bool) -> list[str]:
    """``heading importance | agent | id``, the content, and the metadata when there is any."""
    agent = f" | agent {memory.agent_key}" if memory.agent_key else ""
    memory_id = f" | id {memory.id}" if with_id else ""
    lines = [f"{heading} {memory.importance:g}{agent}{memory_id}", memory.content]
    if memory.metadata:
        lines.append(f"metadata: {json.dumps(dict(memory.metadata), ensure_ascii=False)}")
    return lines


def _found(
    memory: Memory, *, score: float | None, similarity: float | None, justification: str | None
) -> FoundMemory:
    return FoundMemory(
        id=memory.id,
        type=memory.type,
        content=memory.content,
        score=score,
        similarity=similarity,
        importance=memory.importance,
        confidence=memory.confidence,
        agent_key=memory.agent_key,
        justification=justification,
        metadata=dict(memory.metadata),
    )


def written(memory: Memory | PendingRevision) -> tuple[str, AddMemoryOutput]:
    if isinstance(memory, PendingRevision):
        text = (
            f"Stored as revision {memory.revision} of memory {memory.id} in project "
            f"{memory.project_id}, pending review: it is not served until an administrator "
            "accepts it."
        )
        output = AddMemoryOutput(
            id=memory.id,
            project_id=memory.project_id,
            state="pending",
            revision=memory.revision,
            ids=[memory.id],
            pending=[0],
        )
        return text, output
    duplicate = isinstance(memory, WrittenMemory) and memory.duplicate
    if duplicate:
        text = (
            f"Already stored as memory {memory.id} in project {memory.project_id} "
            f"({memory.type}): nothing new was stored."
        )
    else:
        text = (
            f"Stored memory {memory.id} in project {memory.project_id} ({memory.type}, "
            f"importance {memory.importance:g}): search_memories finds it from now on."
        )
    output = AddMemoryOutput(
        id=memory.id,
        project_id=memory.project_id,
        state="accepted",
        revision=None,
        duplicate=duplicate,
        ids=[memory.id],
        duplicates=[0] if duplicate else [],
    )
    return text, output


def written_batch(batch: MemoryBatch) -> tuple[str, AddMemoryOutput]:
    """Several memories of one call, stored together: each id in order, and which were already
    stored (dedupe) or wait for review."""
    stored = len(batch.ids) - len(batch.duplicates)
    lines = [f"Stored {stored} of {len(batch.ids)} memories in project {batch.project_id}."]
    for index, memory_id in enumerate(batch.ids):
        note = (
            " (already stored: nothing new)"
            if index in batch.duplicates
            else " (pending review: not served until an administrator accepts it)"
            if index in batch.pending
            else ""
        )
        lines.append(f"[{index + 1}] {memory_id}{note}")
    output = AddMemoryOutput(
        id=batch.ids[0],
        project_id=batch.project_id,
        state="pending" if 0 in batch.pending else "accepted",
        revision=None,
        duplicate=0 in batch.duplicates,
        ids=list(batch.ids),
        duplicates=list(batch.duplicates),
        pending=list(batch.pending),
    )
    return "\n".join(lines), output


def linked(attribution_id: str, request_id: str, response_id: str) -> tuple[str, LinkOutput]:
    text = (
        f"Linked response {response_id} to retrieval {attribution_id} (request {request_id}) in "
        "the evidence chain."
    )
    return text, LinkOutput(
        attribution_id=attribution_id, request_id=request_id, response_id=response_id
    )
