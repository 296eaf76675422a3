"""Re-embedding: memories whose stored vector is not of the configured embedder get a new one.

A memory's vector records its provider, ``<model>/<dimensions>`` (``MemoryEmbedder.provider``).
When the embeddings endpoint changes (the in-process hashing provider to MiniLM, a model or a
dimension to another), every stored vector is of another provider, /relevant scores them
"incompatible" (similarity 0.00, so 40% of every score is gone), and before this module only a
PATCH that changed a memory's content embedded it again. The rules, each beside the code that
applies it:

1. **Stale.** A served memory is stale when its provider is not the configured one, or it has no
   vector (:func:`configured_provider`; ``store.stale_projects``). Its accepted revision's content
   is embedded again; content, revisions, ``updated_at`` (so recency) and counters stay.
2. **Through the DLP gate, as a write is.** The organisation's policy, redaction before anything
   is sent, a scan failure sends nothing (``embed_contents``, the function writes use). An
   organisation whose policy keeps memory content from the endpoint is never sent anything: its
   stale memories are *withheld*, not waiting, and /relevant does not count them
   (:func:`withholds`).
3. **In batches, each its own transaction** of ``KEYSTONE_CONTEXT_EMBEDDINGS_BATCH_SIZE``
   memories: one request to the endpoint, then the vectors stored. Stopped anywhere (a deadline,
   a crash, a deploy) the finished batches stay, and the next run starts where this one stopped,
   because it selects by provider, not by position (:func:`reembed`).
4. **Side by side.** A batch's memories are locked ``FOR UPDATE SKIP LOCKED``: the CLI beside the
   background job, or two job runs, take different memories instead of waiting or doing the same.
5. **Idempotent.** When nothing is stale, a run reads one index and sends nothing.

The memory's chunk (the context API's copy) gets the same vector when an endpoint is configured,
as a write leaves it (``service._serve``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import psycopg

from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.dlp.gate import open_gate
from context_ledger.dlp.policy import DlpPolicy, load_policy
from context_ledger.errors import ForbiddenError
from context_ledger.log import logger
from context_ledger.memory import store
from context_ledger.memory.chunks import chunk_path
from context_ledger.memory.embedding import MEMORY_CLASSIFICATION, MemoryEmbedder, embed_contents
from context_ledger.memory.projects import find_project
from context_ledger.settings import Settings
from context_ledger.sources import store as sources_store
from context_ledger.spaces.permissions import Permission

#: Embedded to learn the endpoint's dimension when none is configured. A constant, no memory's
#: content: nothing of any organisation is sent by it.
DIMENSION_PROBE = "dimension probe"


@dataclass(frozen=True)
class Progress:
    """Where a run stands: memories re-embedded so far, stale ones left (that may be sent),
    stale ones the DLP policy withholds from the endpoint, and the run's seconds so far."""

    reembedded: int
    remaining: int
    withheld: int
    seconds: float


def configured_provider(
    conn: psycopg.Connection, *, embedder: MemoryEmbedder, settings: Settings
) -> str:
    """The provider a vector written now records (rule 1). Without a configured dimension the
    endpoint's own is learned from one embedding of :data:`DIMENSION_PROBE` (through the gate,
    with the default policy: the text is ours, of no organisation)."""
    if embedder.dimensions:
        return embedder.provider(embedder.dimensions)
    gate = open_gate(
        conn,
        org_id=uuid.UUID(int=0),
        client=embedder.embedder,
        settings=settings,
        policy=DlpPolicy(),
    )
    vector = gate.embed_query_text(DIMENSION_PROBE)
    assert vector is not None  # an embedder is configured and the probe is not blank
    return embedder.provider(len(vector))


def withholds(
    conn: psycopg.Connection,
    *,
    org_id: uuid.UUID,
    embedder: MemoryEmbedder,
    settings: Settings,
    policy: DlpPolicy | None = None,
) -> bool:
    """Whether the organisation's policy keeps memory content from the endpoint (rule 2)."""
    gate = open_gate(
        conn, org_id=org_id, client=embedder.embedder, settings=settings, policy=policy
    )
    return gate.refusal(MEMORY_CLASSIFICATION) is not None


def _reembed_batch(
    conn: psycopg.Connection,
    project: store.StaleProject,
    *,
    embedder: MemoryEmbedder,
    settings: Settings,
    policy: DlpPolicy,
    provider: str,
    limit: int,
) -> int:
    """One batch of the project (rules 2-4), in the caller's transaction: how many were stored."""
    rows = store.lock_stale_batch(conn, space_id=project.space_id, provider=provider, limit=limit)
    if not rows:
        return 0
    vectors = embed_contents(
        conn,
        org_id=project.org_id,
        embedder=embedder,
        settings=settings,
        policy=policy,
        texts=[row["content"] for row in rows],
    )
    stored = {
        row["id"]: vector
        for row, vector in zip(rows, vectors, strict=True)
        if vector is not None and embedder.provider(len(vector)) == provider
    }
    if len(stored) < len(rows):
        # The gate refused after all (the policy changed since it was read), or the endpoint
        # answered another dimension than the one configured: nothing of this batch is stored.
        return 0
    store.store_vectors(conn, provider=provider, vectors=stored)  # unit vectors (embed_contents)
    client = embedder.client
    model = client.model if client is not None else None
    sources_store.store_path_embeddings(
        conn,
        source_id=project.source_id,
        vectors={
            chunk_path(memory_id): vector.tolist() if model is not None else None
            for memory_id, vector in stored.items()
        },
        model=model,
    )
    return len(stored)


def reembed(
    *,
    embedder: MemoryEmbedder,
    settings: Settings,
    org_id: uuid.UUID | None = None,
    space_id: uuid.UUID | None = None,
    max_memories: int | None = None,
    deadline: float | None = None,
    progress: Callable[[Progress], object] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Progress:
    """Re-embed the stale memories of every project (of ``org_id``, or only ``space_id``), batch
    after batch, until none is left, ``max_memories`` are done or the ``clock`` passes
    ``deadline``; ``progress`` hears after the backlog is counted and after every batch.

    A batch whose memories another worker holds is skipped by this one; a project whose every
    remaining memory is held ends this run's work on it (the other worker finishes it).
    """
    started = clock()
    batch = settings.embeddings_batch_size
    with connection() as conn:
        provider = configured_provider(conn, embedder=embedder, settings=settings)
        projects = store.stale_projects(conn, provider=provider, org_id=org_id, space_id=space_id)
        policies = {p.org_id: load_policy(conn, org_id=p.org_id) for p in projects}
        withheld_orgs = {
            org
            for org, policy in policies.items()
            if withholds(conn, org_id=org, embedder=embedder, settings=settings, policy=policy)
        }
    withheld = sum(p.stale for p in projects if p.org_id in withheld_orgs)
    todo = [p for p in projects if p.org_id not in withheld_orgs]
    remaining = sum(p.stale for p in todo)
    done = 0

    def report() -> Progress:
        now = Progress(done, max(remaining, 0), withheld, clock() - started)
        if progress is not None:
            progress(now)
        return now

    last = report()
    for project in todo:
        while True:
            if deadline is not None and clock() >= deadline:
                return last
            if max_memories is not None and done >= max_memories:
                return last
            size = batch if max_memories is None else min(batch, max_memories - done)
            with connection() as conn:
                stored = _reembed_batch(
                    conn,
                    project,
                    embedder=embedder,
                    settings=settings,
                    policy=policies[project.org_id],
                    provider=provider,
                    limit=size,
                )
            if not stored:
                break
            done += stored
            remaining -= stored
            last = report()
    if done:
        logger.info(
            "memories re-embedded",
            extra={"reembedded": done, "provider": provider, "withheld": withheld},
        )
    return report()


def reembed_for(
    principal: Principal,
    key: str | None,
    *,
    embedder: MemoryEmbedder,
    settings: Settings,
    max_memories: int,
    deadline: float,
) -> Progress:
    """A caller's share of the work (``POST /api/v1/context/memories/reembed``, which the CLI
    calls until nothing remains): up to ``max_memories`` of the project ``key``, which needs
    ``context:space:admin`` on it (it changes what the project serves), or without a key of every
    project of the organisation, which needs the ``context:admin`` scope."""
    space_id = None
    if key is not None:
        with connection() as conn:
            space_id = find_project(conn, principal, key, Permission.ADMIN).space_id
    elif not principal.is_context_admin:
        raise ForbiddenError("re-embedding every project needs the context:admin scope")
    return reembed(
        embedder=embedder,
        settings=settings,
        org_id=principal.org_id,
        space_id=space_id,
        max_memories=max_memories,
        deadline=deadline,
    )
