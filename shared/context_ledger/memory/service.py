"""Use cases of the memory API: write (one, a batch, deduplicated on request), change, delete,
access, read one, list, revisions and /relevant.

Every change is a new revision; the entry's accepted revision is what the list, /relevant and the
context API's retrieval (through the memory's chunk) serve. A revision is accepted at once, or, in
a project that requires review, when an admin accepts it. Reading never changes an entry.

Every memory and revision served passes the organisation's DLP delivery rule for memory sources
(``dlp/delivery.py``): its content and metadata strings are redacted unless the action is
``allow``, as retrieval redacts the memory's chunk. Ids, types, agent keys and authors are
identifiers and pass as stored. The chunk's full-text index holds the redacted content.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg

from context_ledger.auth.principal import Principal
from context_ledger.dlp.delivery import Delivery
from context_ledger.dlp.policy import DlpPolicy, load_policy
from context_ledger.dlp.texts import holds_credential, redacted
from context_ledger.errors import ConflictError, NotFoundError, ValidationFailedError
from context_ledger.log import logger
from context_ledger.memory import scoring, store
from context_ledger.memory.chunks import chunk_path, memory_chunk
from context_ledger.memory.embedding import (
    MEMORY_CLASSIFICATION,
    MemoryEmbedder,
    embed_contents,
    embed_query,
)
from context_ledger.memory.model import MEMORY_ID, PROJECT_KEY, Memory, Revision, new_memory_id
from context_ledger.memory.projects import (
    Project,
    find_project,
    find_project_to_propose,
    project_for_write,
)
from context_ledger.memory.reembed import withholds
from context_ledger.memory.vector_cache import VectorCache
from context_ledger.settings import Settings
from context_ledger.sources import store as sources_store
from context_ledger.spaces.permissions import Permission
from context_ledger.text.budget import fit_to_budget
from context_ledger.text.tokens import count_tokens

#: Fields of a revision (the entry holds the rest: agent, counters, timestamps).
REVISION_FIELDS = ("type", "content", "confidence", "importance", "metadata")
_ID_ATTEMPTS = 5
REVISION_NUMBER = re.compile(r"^[1-9][0-9]{0,8}$")


class MemoryNotFoundError(NotFoundError):
    """No such memory in the project (or it was deleted)."""

    code = "memory.not_found"

    def __init__(self) -> None:
        super().__init__("memory not found")


class RevisionNotFoundError(NotFoundError):
    """No such revision of the memory."""

    code = "memory.revision.not_found"

    def __init__(self) -> None:
        super().__init__("revision not found")


class RevisionConflictError(ConflictError):
    """The revision is not pending (already accepted, or superseded)."""

    code = "memory.revision.conflict"


@dataclass(frozen=True)
class NewMemory:
    """One memory to create: its first revision's fields, its agent, and whether a live memory
    it equals answers instead of a new one (``dedupe``)."""

    fields: dict[str, Any]
    agent_key: str | None = None
    dedupe: bool = False


@dataclass(frozen=True)
class Written:
    """What a write did: the memory as now served, or (``memory`` None) a revision pending
    review. A ``duplicate`` stored nothing: ``memory`` is the live memory it equals, and
    ``revision`` None (no revision was added)."""

    memory_id: str
    revision: int | None
    memory: Memory | None
    duplicate: bool = False


@dataclass(frozen=True)
class BatchWritten:
    """What a batch write did: one id per item, in order, and the positions of the items that
    were duplicates (the id is the live memory's) and of those pending review."""

    ids: list[str]
    duplicates: list[int]
    pending: list[int]


@dataclass(frozen=True)
class Dependencies:
    """What the use cases need from outside, injected so tests swap them without patching."""

    settings: Settings
    embedder: MemoryEmbedder
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    #: one per process in the function (a warm container keeps it); a fresh one by default
    vector_cache: VectorCache = field(default_factory=VectorCache)


@dataclass(frozen=True)
class RelevantMemory:
    memory: Memory
    score: float
    similarity: float
    justification: str

    def to_wire(self) -> dict[str, Any]:
        return {
            **self.memory.to_wire(),
            "score": round(self.score, 4),
            "similarity": round(self.similarity, 4),
            "justification": self.justification,
        }


@dataclass(frozen=True)
class RelevantAnswer:
    memories: list[RelevantMemory]
    #: the query as searched for: redacted with the organisation's rules (the answer echoes it)
    query: str = ""
    tokens_used: int | None = None
    #: what made the ranking less than it could be (memories not yet re-embedded), each a sentence
    warnings: tuple[str, ...] = ()


def _delivery(conn: psycopg.Connection, principal: Principal) -> Delivery:
    return Delivery(load_policy(conn, org_id=principal.org_id))


def _memory(project: Project, row: store.Row, delivery: Delivery) -> Memory:
    """A stored memory as delivered."""
    return Memory(
        id=row["id"],
        org_id=row["org_id"],
        project_id=project.key,
        agent_key=row["agent_key"],
        type=row["type"],
        content=delivery.text(MEMORY_CLASSIFICATION, row["content"]),
        confidence=row["confidence"],
        importance=row["importance"],
        access_count=row["access_count"],
        last_accessed_at=row["last_accessed_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        metadata=delivery.json(MEMORY_CLASSIFICATION, row["metadata"]),
    )


def _served(
    conn: psycopg.Connection, project: Project, memory_id: str, delivery: Delivery
) -> Memory:
    rows = store.memories_by_ids(conn, space_id=project.space_id, ids=[memory_id])
    if not rows:
        raise MemoryNotFoundError()
    return _memory(project, rows[0], delivery)


def _serve(
    conn: psycopg.Connection,
    principal: Principal,
    project: Project,
    *,
    memory_id: str,
    revision: int,
    fields: dict[str, Any],
    agent_key: str | None,
    policy: DlpPolicy,
    vector: np.ndarray | None,
    deps: Dependencies,
) -> None:
    """Accept ``revision`` (with these ``fields`` and the content's ``vector``, see
    :func:`_embedded`): serve it, make it the chunk."""
    tokens = count_tokens(fields["content"])
    store.accept_revision(
        conn,
        entry_id=memory_id,
        revision=revision,
        importance=fields["importance"],
        embedding_f32=vector.astype("<f4").tobytes() if vector is not None else None,
        embedding_provider=deps.embedder.provider(len(vector)) if vector is not None else None,
        token_count=tokens,
        accepted_by=principal.user_id,
    )
    client = deps.embedder.client
    chunk = memory_chunk(
        memory_id=memory_id,
        revision=revision,
        memory_type=fields["type"],
        agent_key=agent_key,
        content=fields["content"],
        search_text=redacted(policy.patterns, fields["content"], stage="indexing"),
        token_count=tokens,
        embedding=vector.tolist() if client is not None and vector is not None else None,
    )
    assert project.source_id is not None  # writers get a source (projects.find_project)
    sources_store.replace_served_chunk(
        conn,
        source_id=project.source_id,
        chunk=chunk,
        model=client.model if client is not None else None,
    )


def _embedded(
    conn: psycopg.Connection,
    principal: Principal,
    policy: DlpPolicy,
    contents: list[str],
    deps: Dependencies,
) -> list[np.ndarray | None]:
    """The contents' vectors, through the DLP gate in one call."""
    return embed_contents(
        conn,
        org_id=principal.org_id,
        embedder=deps.embedder,
        settings=deps.settings,
        policy=policy,
        texts=contents,
    )


def _propose(
    conn: psycopg.Connection,
    principal: Principal,
    project: Project,
    *,
    memory_id: str,
    revision: int,
    fields: dict[str, Any],
    agent_key: str | None,
    deps: Dependencies,
) -> Written:
    """Add ``revision``: served at once, or pending where the project requires review."""
    store.insert_revision(
        conn, entry_id=memory_id, revision=revision, fields=fields, author=principal.user_id
    )
    if project.review_required:
        return Written(memory_id=memory_id, revision=revision, memory=None)
    delivery = _delivery(conn, principal)
    [vector] = _embedded(conn, principal, delivery.policy, [fields["content"]], deps)
    _serve(
        conn,
        principal,
        project,
        memory_id=memory_id,
        revision=revision,
        fields=fields,
        agent_key=agent_key,
        policy=delivery.policy,
        vector=vector,
        deps=deps,
    )
    memory = _served(conn, project, memory_id, delivery)
    return Written(memory_id=memory_id, revision=revision, memory=memory)


def _project_to_write(conn: psycopg.Connection, principal: Principal, key: str) -> Project:
    """The project a creation writes into (made on the first write to its key)."""
    if not PROJECT_KEY.fullmatch(key):
        raise ValidationFailedError(
            "project_id: 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    if holds_credential(key, random=False):
        # A key is echoed in every answer about the project, to each of its readers.
        raise ValidationFailedError(
            "project_id: must name a project, not hold a credential (it is delivered as written)"
        )
    return project_for_write(conn, principal, key)


def _new_entry(
    conn: psycopg.Connection, principal: Principal, project: Project, agent_key: str | None
) -> str:
    """A new entry with an unused id, without a revision yet."""
    for _ in range(_ID_ATTEMPTS):
        memory_id = new_memory_id()
        if store.insert_entry(
            conn,
            entry_id=memory_id,
            org_id=principal.org_id,
            space_id=project.space_id,
            agent_key=agent_key,
        ):
            return memory_id
    # five 48-bit collisions in a row: something other than chance
    raise RuntimeError("could not draw an unused memory id")


def _hides_something(delivery: Delivery, content: str) -> bool:
    """Whether the content is delivered redacted. Such a memory is never reported as a
    duplicate: "you wrote what it holds" would confirm a guessed secret its answer hides (the
    list's ``q`` keeps the same rule)."""
    return delivery.text(MEMORY_CLASSIFICATION, content) != content


@dataclass(frozen=True)
class _Created:
    memory_id: str
    duplicate: bool


def _create(
    conn: psycopg.Connection,
    principal: Principal,
    project: Project,
    items: list[NewMemory],
    delivery: Delivery,
    deps: Dependencies,
) -> list[_Created]:
    """Create ``items`` as if written one after another, in the caller's one transaction.

    An item with ``dedupe`` whose normalised content and type equal a live memory's (the key of
    migration 0018) is answered with that memory and stores nothing; "live" includes the earlier
    items of the same batch once they are served (not while they wait for review). Without any
    ``dedupe`` no key is looked up: the spec's write is unchanged. The new memories' contents go
    through the DLP gate to the embeddings endpoint together, in one call.
    """
    live: dict[bytes, str] = {}  # dedupe key -> a live memory a later item may equal
    keys: list[bytes | None] = [None] * len(items)
    if any(item.dedupe for item in items):
        found = store.dedupe_matches(
            conn,
            space_id=project.space_id,
            items=[(item.fields["type"], item.fields["content"]) for item in items],
        )
        keys = [key for key, _ in found]
        matched = {match for _, match in found if match is not None}
        rows = store.memories_by_ids(conn, space_id=project.space_id, ids=sorted(matched))
        shown = {row["id"] for row in rows if not _hides_something(delivery, row["content"])}
        live = {key: match for key, match in found if match in shown}
    created: list[_Created] = []
    stored: list[tuple[str, NewMemory]] = []
    for item, key in zip(items, keys, strict=True):
        if item.dedupe and key in live:
            created.append(_Created(live[key], duplicate=True))
            continue
        memory_id = _new_entry(conn, principal, project, item.agent_key)
        store.insert_revision(
            conn, entry_id=memory_id, revision=1, fields=item.fields, author=principal.user_id
        )
        created.append(_Created(memory_id, duplicate=False))
        stored.append((memory_id, item))
        served_now = key is not None and not project.review_required
        if served_now and not _hides_something(delivery, item.fields["content"]):
            live.setdefault(key, memory_id)
    if project.review_required or not stored:
        return created
    vectors = _embedded(
        conn, principal, delivery.policy, [item.fields["content"] for _, item in stored], deps
    )
    for (memory_id, item), vector in zip(stored, vectors, strict=True):
        _serve(
            conn,
            principal,
            project,
            memory_id=memory_id,
            revision=1,
            fields=item.fields,
            agent_key=item.agent_key,
            policy=delivery.policy,
            vector=vector,
            deps=deps,
        )
    return created


def create_memory(
    conn: psycopg.Connection,
    principal: Principal,
    key: str,
    *,
    item: NewMemory,
    deps: Dependencies,
) -> Written:
    """A new memory (revision 1), or with ``item.dedupe`` the live memory it equals; the project
    is created on its first write."""
    project = _project_to_write(conn, principal, key)
    delivery = _delivery(conn, principal)
    [done] = _create(conn, principal, project, [item], delivery, deps)
    if done.duplicate:
        memory = _served(conn, project, done.memory_id, delivery)
        return Written(memory_id=done.memory_id, revision=None, memory=memory, duplicate=True)
    if project.review_required:
        return Written(memory_id=done.memory_id, revision=1, memory=None)
    memory = _served(conn, project, done.memory_id, delivery)
    return Written(memory_id=done.memory_id, revision=1, memory=memory)


def create_memories(
    conn: psycopg.Connection,
    principal: Principal,
    key: str,
    *,
    items: list[NewMemory],
    deps: Dependencies,
) -> BatchWritten:
    """Several new memories at once, all or none: the items are validated as single writes are
    (the route does it), and written in the caller's transaction, so any failure (the embeddings
    endpoint, a DLP scan) leaves nothing of the batch behind."""
    project = _project_to_write(conn, principal, key)
    created = _create(conn, principal, project, items, _delivery(conn, principal), deps)
    return BatchWritten(
        ids=[done.memory_id for done in created],
        duplicates=[i for i, done in enumerate(created) if done.duplicate],
        pending=[
            i for i, done in enumerate(created) if project.review_required and not done.duplicate
        ],
    )


def update_memory(
    conn: psycopg.Connection,
    principal: Principal,
    key: str,
    memory_id: str,
    *,
    changes: dict[str, Any],
    deps: Dependencies,
) -> Written:
    """A new revision with ``changes`` over the accepted one (no change: no revision)."""
    project = find_project_to_propose(conn, principal, key)
    current = store.lock_entry(conn, space_id=project.space_id, entry_id=memory_id)
    if current is None:
        raise MemoryNotFoundError()
    fields = {name: current[name] for name in REVISION_FIELDS}
    updated = {**fields, **changes}
    if updated == fields:
        return Written(
            memory_id=memory_id,
            revision=current["accepted_revision"],
            memory=_served(conn, project, memory_id, _delivery(conn, principal)),
        )
    return _propose(
        conn,
        principal,
        project,
        memory_id=memory_id,
        revision=current["latest_revision"] + 1,
        fields=updated,
        agent_key=current["agent_key"],
        deps=deps,
    )


def accept_revision(
    conn: psycopg.Connection,
    principal: Principal,
    key: str,
    memory_id: str,
    revision: int,
    *,
    deps: Dependencies,
) -> Memory:
    """Serve a pending revision (an admin's review): older pending ones are superseded."""
    project = find_project(conn, principal, key, Permission.ADMIN)
    row = store.revision_for_update(
        conn, space_id=project.space_id, entry_id=memory_id, revision=revision
    )
    if row is None:
        raise RevisionNotFoundError()
    if row["state"] != "pending":
        raise RevisionConflictError(f"revision {revision} is {row['state']}, not pending")
    delivery = _delivery(conn, principal)
    fields = {name: row[name] for name in REVISION_FIELDS}
    [vector] = _embedded(conn, principal, delivery.policy, [fields["content"]], deps)
    _serve(
        conn,
        principal,
        project,
        memory_id=memory_id,
        revision=revision,
        fields=fields,
        agent_key=row["agent_key"],
        policy=delivery.policy,
        vector=vector,
        deps=deps,
    )
    return _served(conn, project, memory_id, delivery)


def set_review_required(
    conn: psycopg.Connection, principal: Principal, key: str, *, required: bool
) -> None:
    """Whether new revisions of the project wait for an admin's acceptance (admins decide)."""
    project = find_project(conn, principal, key, Permission.ADMIN)
    store.set_review_required(conn, space_id=project.space_id, required=required)


def delete_memory(conn: psycopg.Connection, principal: Principal, key: str, memory_id: str) -> None:
    """Stop serving the memory (its revisions stay, for the evidence that names them)."""
    project = find_project(conn, principal, key, Permission.ADMIN)
    if not store.delete_entry(
        conn, space_id=project.space_id, entry_id=memory_id, user=principal.user_id
    ):
        raise MemoryNotFoundError()
    sources_store.remove_served_chunk(conn, source_id=project.source_id, path=chunk_path(memory_id))


def record_access(
    conn: psycopg.Connection, principal: Principal, key: str, memory_id: str
) -> Memory:
    """Count an explicit use of the memory (the only thing that raises ``access_count``)."""
    project = find_project(conn, principal, key, Permission.SEARCH)
    if not store.record_access(conn, space_id=project.space_id, entry_id=memory_id):
        raise MemoryNotFoundError()
    return _served(conn, project, memory_id, _delivery(conn, principal))


def list_memories(
    conn: psycopg.Connection,
    principal: Principal,
    key: str,
    *,
    type: str | None,
    agent: str | None,
    q: str | None,
    limit: int,
    offset: int,
) -> list[Memory]:
    """Newest first (``created_desc``), filtered by exact type and agent and a substring.

    The substring ``q`` is looked for in the content as delivered: a memory whose stored content
    holds it only inside a redacted value is not listed, or ``q`` would confirm a guessed secret
    that the answer shows redacted. The database finds the stored matches, in pages; those that
    redaction changed are checked again, and a page short of ``offset + limit`` kept memories
    reads the next (only when matches were redacted away)."""
    project = find_project(conn, principal, key, Permission.SEARCH)
    delivery = _delivery(conn, principal)

    def page(size: int, start: int) -> list[tuple[Memory, str]]:
        rows = store.list_memories(
            conn, space_id=project.space_id, type=type, agent=agent, q=q, limit=size, offset=start
        )
        return [(_memory(project, row, delivery), row["content"]) for row in rows]

    if q is None or not delivery.redacts(MEMORY_CLASSIFICATION):
        return [memory for memory, _ in page(limit, offset)]
    wanted, read = offset + limit, 0
    kept: list[Memory] = []
    while len(kept) < wanted:
        found = page(wanted, read)
        read += len(found)
        kept.extend(
            memory
            for memory, stored in found
            if memory.content == stored or q.lower() in memory.content.lower()
        )
        if len(found) < wanted:
            break
    return kept[offset:wanted]


def get_memory(conn: psycopg.Connection, principal: Principal, key: str, memory_id: str) -> Memory:
    """One served memory, read as the list reads it: ``context:space:search`` on the project,
    any agent's memory, delivered through DLP. Pending (never accepted) and deleted memories, and
    another project's, are ``404 memory.not_found``."""
    project = find_project(conn, principal, key, Permission.SEARCH)
    return _served(conn, project, memory_id, _delivery(conn, principal))


def memory_revisions(
    conn: psycopg.Connection, principal: Principal, key: str, memory_id: str
) -> list[Revision]:
    project = find_project(conn, principal, key, Permission.SEARCH)
    rows = store.revisions(conn, space_id=project.space_id, entry_id=memory_id)
    if not rows:
        raise MemoryNotFoundError()
    delivery = _delivery(conn, principal)
    return [
        Revision(
            revision=row["revision"],
            state=row["state"],
            type=row["type"],
            content=delivery.text(MEMORY_CLASSIFICATION, row["content"]),
            confidence=row["confidence"],
            importance=row["importance"],
            metadata=delivery.json(MEMORY_CLASSIFICATION, row["metadata"]),
            author=row["author_user_id"],
            created_at=row["created_at"],
            accepted_at=row["accepted_at"],
        )
        for row in rows
    ]


def _justification(similarity: float, *, empty: bool, compatible: bool, label: str) -> str:
    if empty:
        return f"empty query: similarity 1.00 for every memory ({label})"
    if not compatible:
        return f"incompatible vectors: similarity 0.00 ({label})"
    return f"semantic similarity {similarity:.2f} ({label})"


def _stale_warning(
    conn: psycopg.Connection,
    principal: Principal,
    found: store.Candidates,
    *,
    known: bool,
    label: str,
    delivery: Delivery,
    deps: Dependencies,
) -> tuple[str, ...]:
    """A sentence naming how many of the candidates are not yet re-embedded with the configured
    model (memory/reembed.py), when any is: their similarity is 0.00 until they are. Counted from
    the candidates' ``compatible`` flags, which the candidate query computes anyway. Memories an
    organisation's DLP policy keeps from the endpoint are never re-embedded, so are not counted:
    the warning is about a backlog that goes away."""
    stale = int(np.count_nonzero(~found.compatible)) if known else 0
    if not stale or withholds(
        conn,
        org_id=principal.org_id,
        embedder=deps.embedder,
        settings=deps.settings,
        policy=delivery.policy,
    ):
        return ()
    one = stale == 1
    return (
        f"{stale} {'memory' if one else 'memories'} of this project {'is' if one else 'are'} not "
        f"yet re-embedded with {label}: {'its' if one else 'their'} similarity is 0.00 "
        "(incompatible vectors) until re-embedding reaches "
        f"{'it' if one else 'them'}; it runs in the background, and "
        "`context-ledger memories reembed` runs it now",
    )


def _drop_oldest(found: store.Candidates) -> store.Candidates:
    """The candidates without the oldest one (by creation, then id: the SQL's order)."""
    oldest = np.lexsort((found.id_number, found.created_at))[0]
    keep = np.arange(len(found.ids)) != oldest
    return store.Candidates(
        **{name: getattr(found, name)[keep] for name in store.Candidates.__dataclass_fields__}
    )


@dataclass(frozen=True, eq=False)
class _RelevantQuery:
    """A /relevant query's vector, and the provider the candidates are compared under."""

    empty: bool
    #: None: an empty query, or the gate sent nothing (nothing can match)
    vector: np.ndarray | None
    #: of ``vector`` (0: none)
    dimensions: int
    provider: str | None
    #: what the candidates' ``compatible`` flags are computed for (0 and None: unknown)
    known_dimensions: int
    known_provider: str | None


def _relevant_query(
    conn: psycopg.Connection,
    principal: Principal,
    query: str,
    delivery: Delivery,
    deps: Dependencies,
) -> _RelevantQuery:
    """The query embedded through the DLP gate (an empty one embeds nothing)."""
    empty = not query.strip()
    vector = None
    if not empty:
        vector = embed_query(
            conn,
            org_id=principal.org_id,
            embedder=deps.embedder,
            settings=deps.settings,
            policy=delivery.policy,
            text=query,
        )
    dimensions = len(vector) if vector is not None else 0
    # An empty query embeds nothing, so it knows the provider only when the dimension is
    # configured: then its candidates still say which vectors are not yet re-embedded.
    known_dimensions = dimensions or (deps.embedder.dimensions if empty else None) or 0
    return _RelevantQuery(
        empty=empty,
        vector=vector,
        dimensions=dimensions,
        provider=deps.embedder.provider(dimensions) if dimensions else None,
        known_dimensions=known_dimensions,
        known_provider=deps.embedder.provider(known_dimensions) if known_dimensions else None,
    )


def _capped_candidates(
    conn: psycopg.Connection, project: Project, asked: _RelevantQuery, deps: Dependencies
) -> store.Candidates:
    """The newest served entries, at most the candidate cap of them (the oldest dropped)."""
    cap = deps.settings.memory_max_candidates
    found = store.candidates(
        conn,
        space_id=project.space_id,
        limit=cap + 1,
        provider=asked.known_provider,
        dimensions=asked.known_dimensions,
    )
    if len(found.ids) > cap:
        logger.warning(
            "memory candidates truncated to VENKAI_RETRIEVAL_MAX_CANDIDATES, oldest dropped",
            extra={"project_space_id": str(project.space_id), "cap": cap},
        )
        found = _drop_oldest(found)
    return found


@dataclass(frozen=True, eq=False)
class _Compared:
    """Each candidate's similarity with the query, and whether its vector could be compared."""

    similarity: np.ndarray
    compatible: np.ndarray


def _compared(
    conn: psycopg.Connection,
    project: Project,
    found: store.Candidates,
    asked: _RelevantQuery,
    deps: Dependencies,
) -> _Compared:
    """The candidates' similarities: 1 for every one for an empty query, 0 without a query
    vector, else the cosine with the vectors of the query's provider (from the vector cache,
    which reads the missing ones)."""
    count = len(found.ids)
    if asked.empty:
        return _Compared(np.ones(count), np.ones(count, dtype=bool))
    vector, provider = asked.vector, asked.provider
    if vector is None or provider is None:  # the gate sent nothing: nothing can match
        return _Compared(np.zeros(count), np.zeros(count, dtype=bool))

    def fetch(ids: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The missing vectors: by id when few, else all the candidates' in one scan."""
        by_id = len(ids) * 2 <= count
        return store.vectors(
            conn,
            space_id=project.space_id,
            provider=provider,
            dimensions=asked.dimensions,
            ids=ids if by_id else None,
            newest=None if by_id else count,
        )

    vectors, compatible = deps.vector_cache.vectors(
        (project.space_id, provider),
        dimensions=asked.dimensions,
        ids=found.ids.tolist(),
        updated_at=found.updated_at,
        compatible=found.compatible,
        fetch=fetch,
    )
    return _Compared(scoring.similarities(vector, vectors, compatible), compatible)


@dataclass(frozen=True, eq=False)
class _Ranking:
    """Every candidate's score, and the positions answered, best first."""

    scores: np.ndarray
    top: list[int]
    tokens_used: int | None


def _ranked(
    found: store.Candidates,
    compared: _Compared,
    *,
    limit: int,
    min_score: float | None,
    token_budget: int | None,
    deps: Dependencies,
) -> _Ranking:
    """The candidates scored and ranked, then the first ``limit`` of those at or above
    ``min_score`` that fit ``token_budget`` (with the tokens they use)."""
    scores = scoring.score(
        similarity=compared.similarity,
        recency=scoring.recency(deps.now().timestamp() - found.updated_at),
        importance=found.importance,
        frequency=scoring.frequency(found.access_count),
    )
    order = scoring.ranking(scores, found.created_at, found.id_number)
    if min_score is not None:
        order = order[scores[order] >= min_score]
    used = None
    if token_budget is not None:
        order, used = fit_to_budget(order, token_budget, lambda i: int(found.token_count[i]))
        order = order[:limit]
        used = sum(int(found.token_count[i]) for i in order)
    return _Ranking(scores=scores, top=[int(i) for i in order[:limit]], tokens_used=used)


def _answered(
    conn: psycopg.Connection,
    project: Project,
    delivery: Delivery,
    found: store.Candidates,
    compared: _Compared,
    ranking: _Ranking,
    *,
    empty: bool,
    label: str,
) -> list[RelevantMemory]:
    """The memories ranked on top, as delivered, with their scores and justifications."""
    ids = [str(found.ids[i]) for i in ranking.top]
    rows = {
        row["id"]: row for row in store.memories_by_ids(conn, space_id=project.space_id, ids=ids)
    }
    return [
        RelevantMemory(
            memory=_memory(project, rows[found.ids[i]], delivery),
            score=float(ranking.scores[i]),
            similarity=float(compared.similarity[i]),
            justification=_justification(
                float(compared.similarity[i]),
                empty=empty,
                compatible=bool(compared.compatible[i]),
                label=label,
            ),
        )
        for i in ranking.top
        if found.ids[i] in rows  # deleted since the candidates were read: skip
    ]


def relevant_memories(
    conn: psycopg.Connection,
    principal: Principal,
    key: str,
    *,
    query: str,
    limit: int,
    min_score: float | None,
    token_budget: int | None,
    deps: Dependencies,
) -> RelevantAnswer:
    """The spec's /relevant: every served memory (up to the candidate cap, newest kept) scored,
    ranked, the first ``limit`` returned. ``min_score`` and ``token_budget`` are opt-in.

    Everything is read in one read-only snapshot: the candidates, the vectors fetched for them
    and the rows of the answer agree, and the call cannot change anything.
    """
    store.read_snapshot(conn)
    project = find_project(conn, principal, key, Permission.SEARCH)
    delivery = _delivery(conn, principal)
    asked = _relevant_query(conn, principal, query, delivery, deps)
    found = _capped_candidates(conn, project, asked, deps)
    said = _stale_warning(
        conn,
        principal,
        found,
        known=asked.known_provider is not None,
        label=deps.embedder.label(asked.known_dimensions or None),
        delivery=delivery,
        deps=deps,
    )
    compared = _compared(conn, project, found, asked, deps)
    ranking = _ranked(
        found, compared, limit=limit, min_score=min_score, token_budget=token_budget, deps=deps
    )
    memories = _answered(
        conn,
        project,
        delivery,
        found,
        compared,
        ranking,
        empty=asked.empty,
        label=deps.embedder.label(asked.dimensions or None),
    )
    return RelevantAnswer(
        memories=memories,
        query=delivery.redact(query),
        tokens_used=ranking.tokens_used,
        warnings=said,
    )


def parse_memory_id(raw: str) -> str:
    """A memory id from a path; anything else is an unknown memory."""
    if not MEMORY_ID.fullmatch(raw):
        raise MemoryNotFoundError()
    return raw


def parse_revision(raw: str) -> int:
    """A revision number from a path; anything but a positive integer is an unknown revision."""
    if not REVISION_NUMBER.fullmatch(raw):
        raise RevisionNotFoundError()
    return int(raw)
