"""The retrieve use case: chain → DLP source filter → search (cached) → rank → cap per level →
DLP redaction → budget → related code → attribution event → answer.

Within one answer each delivered text comes once: a chunk whose text as delivered (after
redaction; SHA-256) equals that of a higher-ranked chunk already delivered is skipped before the
budget, so it spends none of it and the evidence record does not list it. (It has used one of its
level's ``maxPerLevel`` places: the cap runs on the search's candidates, before their rows, and so
their texts, are read.)

The search step (candidate ids and scores) is the only part cached; authorisation, DLP, the
per-level cap, the budget and the attribution run on every request.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import psycopg

from context_ledger.attribution.events import (
    MEMORY_IDENTIFIER_KEYS,
    memory_fields,
    new_request_id,
)
from context_ledger.auth.principal import Principal
from context_ledger.cooldown import Cooldown
from context_ledger.db.pending import Pending
from context_ledger.dlp.delivery import Delivery
from context_ledger.dlp.gate import EmbeddingGate, open_gate
from context_ledger.dlp.policy import NEVER_EMBEDDED, DlpPolicy, pending_policy
from context_ledger.dlp.texts import redacted
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.evidence.canonical import format_timestamp
from context_ledger.retrieval import store, warnings
from context_ledger.retrieval.cache import CachedSearch, SearchCache
from context_ledger.retrieval.chain import (
    SearchSource,
    SearchSpace,
    pending_chain_sources,
    pending_chain_terms,
    pending_search_spaces,
    searchable_sources,
)
from context_ledger.retrieval.query import RetrieveQuery
from context_ledger.retrieval.query_vector import (
    DEGRADED_WARNING,
    QueryVector,
    SearchMode,
    query_vector,
    without_embedding,
)
from context_ledger.retrieval.related import pick_related
from context_ledger.search.candidates import Candidate, search_candidates
from context_ledger.search.fulltext import TermCounts, has_terms
from context_ledger.search.hybrid import rank
from context_ledger.search.query import SearchQuery
from context_ledger.search.vectors import pending_pgvector_available, require_pgvector
from context_ledger.settings import SearchBackend, Settings
from context_ledger.sources import store as sources_store
from context_ledger.sources.model import SourceKind
from context_ledger.spaces.levels import Level
from context_ledger.spaces.weights import pending_weights
from context_ledger.text.budget import fit_to_budget
from context_ledger.tracing import step

#: How many candidates each search returns, per level of the chain, before ranking and the
#: per-level cap: a level is searched on its own, so many strong matches at one level never
#: crowd another level's best out of the candidates.
CANDIDATES = 100
ATTRIBUTION_CATEGORY = "context_attribution"


@dataclass(frozen=True)
class DeliveredChunk:
    row: dict[str, Any]
    source: SearchSource
    level: Level
    score: float
    related_to: uuid.UUID | None = None
    related_relation: str | None = None

    @property
    def tokens(self) -> int:
        return self.row["token_count"]


@dataclass(frozen=True)
class RetrieveAnswer:
    request_id: str
    attribution_id: uuid.UUID
    chunks: list[DeliveredChunk]
    tokens_used: int
    sources: dict[uuid.UUID, SearchSource] = field(default_factory=dict)
    search_mode: SearchMode = SearchMode.HYBRID
    warnings: tuple[str, ...] = ()
    #: The evidence record of this answer (``attribution_event``), for the caller to queue once
    #: the answer is sure to be delivered: evidence of an answer never delivered must not exist.
    event: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Dependencies:
    """What the use case needs from outside, injected so tests swap them without patching."""

    settings: Settings
    cache: SearchCache
    embedder: EmbeddingsClient | None
    #: One per process in the service (retrieval/query_vector.py); a fresh one by default.
    cooldown: Cooldown = field(default_factory=Cooldown)
    #: A second connection for the vector search to run beside the text search, or None
    #: (db.spare_connection in the service; by default both run on the request's connection).
    side_connection: Callable[[], AbstractContextManager[psycopg.Connection | None]] = lambda: (
        nullcontext()
    )
    #: Sends the request's count against its rate limits with the first round trip; reading it
    #: raises RateLimitedError when refused (http/ratelimit.py). None: counted elsewhere.
    count_request: Callable[[psycopg.Connection], Pending[None]] | None = None


def _cache_key(
    principal: Principal,
    spaces: list[SearchSpace],
    sources: list[SearchSource],
    text: str,
    gate: EmbeddingGate,
    deps: Dependencies,
) -> Hashable:
    return (
        principal.org_id,
        frozenset(s.id for s in spaces),
        frozenset(s.id for s in sources),
        text,
        deps.settings.search_backend,
        gate.model,
        gate.policy.patterns,  # the query is embedded redacted with them
    )


def _versions(sources: Iterable[SearchSource]) -> dict[uuid.UUID, int]:
    """The index version searched of each source (read with the chain)."""
    return {source.id: source.index_version for source in sources}


def _states(sources: Iterable[SearchSource]) -> dict[uuid.UUID, Hashable]:
    """What a cached search of ``sources`` depends on, per source (read with the chain): its
    index version (a publish) and its last change (also a memory write, which replaces a chunk
    within the one version). Every searched source counts, not only those with hits: a source
    without a hit may have one after its next publish or edit."""
    return {source.id: (source.index_version, source.updated_at) for source in sources}


def _search(
    conn: psycopg.Connection,
    principal: Principal,
    spaces: list[SearchSpace],
    sources: list[SearchSource],
    text: str,
    gate: EmbeddingGate,
    deps: Dependencies,
    chain_terms: Pending[TermCounts],
    policy: DlpPolicy,
) -> tuple[list[Candidate], QueryVector]:
    """The candidates for the (redacted) query ``text`` and how they were found.
    ``chain_terms``: its terms counted per source over the chain's sources, ``sources`` among
    them. A full-text fallback for an endpoint that failed is not cached: the next request tries
    the endpoint again (after the cooldown)."""
    key = _cache_key(principal, spaces, sources, text, gate, deps)
    versions, states = _versions(sources), _states(sources)
    cached = deps.cache.get(key)
    if cached is not None:
        # The key names every searched source, so both name the same sources.
        if cached.source_states == states:
            return list(cached.candidates), without_embedding(gate)
        deps.cache.discard(key)  # a source was published, re-indexed or edited since
    # The terms travelled with the chain and are read while the query is embedded.
    query = query_vector(gate, text, settings=deps.settings, cooldown=deps.cooldown)
    counts = chain_terms.result()
    levels = {space.id: space.level for space in spaces}
    # The HNSW statement filters on the sources' versions (sources/searchable.py).
    hnsw = deps.settings.search_backend is SearchBackend.PGVECTOR and query.vector is not None
    searched = [s.id for s in sources]
    searches = [
        SearchQuery(
            principal.org_id,
            part,
            text,
            None if text_only else query.vector,
            CANDIDATES,
            terms=counts.terms(searched, matched_in=part),
            versions={id: versions[id] for id in part} if hnsw and not text_only else {},
            levels=dict.fromkeys(part, level) if hnsw and not text_only else {},
            level=level,
            chunks=counts.chunks(part),
        )
        for (level, text_only), part in _parts(sources, levels, policy).items()
    ]
    with deps.side_connection() if query.vector is not None else nullcontext() as side:
        candidates = search_candidates(
            conn,
            searches,
            backend=deps.settings.search_backend,
            ef_search=deps.settings.hnsw_ef_search,
            side_connection=side,
        )
    if not query.degraded:
        deps.cache.put(key, CachedSearch(candidates=tuple(candidates), source_states=states))
    return candidates, query


def _parts(
    sources: list[SearchSource], levels: dict[uuid.UUID, Level], policy: DlpPolicy
) -> dict[tuple[Level, bool], list[uuid.UUID]]:
    """The searched sources by level, and within a level by whether they are searched through
    full-text only (DLP ``drop`` and ``block_source``: never embedded, never in a vector
    search, whatever vectors a policy changed since indexing left behind)."""
    parts: dict[tuple[Level, bool], list[uuid.UUID]] = {}
    for source in sources:
        text_only = policy.action(source.classification) in NEVER_EMBEDDED
        parts.setdefault((levels[source.space_id], text_only), []).append(source.id)
    return parts


def _ranked_chunks(
    conn: psycopg.Connection,
    principal: Principal,
    candidates: list[Candidate],
    sources: dict[uuid.UUID, SearchSource],
    levels: dict[uuid.UUID, Level],
    request: RetrieveQuery,
    weights: dict[str, float],
) -> list[DeliveredChunk]:
    """Ranked candidates, at most ``maxPerLevel`` per level, with their stored rows."""
    # Hundreds of candidates, a handful of sources: each candidate's level is one lookup.
    level_of = {id: levels[source.space_id] for id, source in sources.items()}
    weight_of = {id: weights[level] for id, level in level_of.items()}
    usable = [c for c in candidates if c.source_id in level_of]
    searched_levels = len(set(level_of.values()))
    per_level: dict[Level, int] = {}
    capped = []
    full = 0  # levels holding maxPerLevel chunks already
    for ranked in rank(usable, lambda candidate: weight_of[candidate.source_id]):
        level = level_of[ranked.candidate.source_id]
        count = per_level.get(level, 0)
        if count < request.max_per_level:
            per_level[level] = count + 1
            capped.append(ranked)
            full += count + 1 == request.max_per_level
            if full == searched_levels:
                break  # every level is full: the rest would all be capped
    rows = sources_store.chunks_by_id(
        conn,
        org_id=principal.org_id,
        ids=[r.candidate.chunk_id for r in capped],
        versions=_versions(sources.values()),
    )
    return [
        DeliveredChunk(
            row=rows[r.candidate.chunk_id],
            source=sources[r.candidate.source_id],
            level=levels[sources[r.candidate.source_id].space_id],
            score=r.score,
        )
        for r in capped
        if r.candidate.chunk_id in rows  # re-indexed or deleted since a cached search: skip
    ]


def _warnings(
    request: RetrieveQuery,
    query: QueryVector,
    spaces: list[SearchSpace],
    searchable: list[SearchSource],
    withheld: list[SearchSource],
    *,
    offered: list[DeliveredChunk],
    delivered: list[DeliveredChunk],
    termless: bool = False,
) -> tuple[str, ...]:
    """What made the answer less than it could be, each in a sentence (retrieval/warnings.py)."""
    said: list[str] = [DEGRADED_WARNING] if query.degraded else []
    if termless:
        said.append(warnings.no_terms())
    if not spaces:
        said.append(warnings.nothing_searchable())
    elif not searchable:
        levels = [s.level for s in spaces]
        space_given = request.space_id is not None
        said.append(warnings.no_source(levels, request.kinds(), space_given=space_given))
    if withheld:
        said.append(warnings.withheld(withheld))
    if offered and not delivered:
        said.append(warnings.budget_too_small(request.token_budget, min(c.tokens for c in offered)))
    return tuple(said)


def _as_delivered(chunk: DeliveredChunk, delivery: Delivery) -> DeliveredChunk:
    """The chunk as the caller receives it: every text of its row and its source's name redacted
    unless the source's action is ``allow``; its row carries the delivered content, hash and
    token count from here on (the evidence records those)."""
    row, source = chunk.row, chunk.source
    if not delivery.redacts(source.classification):
        return chunk
    text = delivery.content(
        source.classification,
        content=row["content"],
        sha256=bytes(row["content_sha256"]),
        tokens=row["token_count"],
    )
    delivered = {
        **row,
        "content": text.content,
        "content_sha256": text.sha256,
        "token_count": text.tokens,
        "path": delivery.redact(row["path"]),
        "language": delivery.redact_optional(row["language"]),
        "symbol": delivery.redact_optional(row["symbol"]),
        "metadata": delivery.redact_json(row["metadata"], identifiers=MEMORY_IDENTIFIER_KEYS),
    }
    named = replace(source, name=delivery.redact(source.name))
    return replace(chunk, row=delivered, source=named)


def _tokens(chunk: DeliveredChunk) -> int:
    return chunk.tokens


def _delivered_sha256(chunk: DeliveredChunk) -> bytes:
    """The SHA-256 of the text the caller receives (the stored one, or the redacted one
    :func:`_as_delivered` put in the row): two chunks with the same one deliver the same text,
    whatever their sources, paths or levels."""
    return bytes(chunk.row["content_sha256"])


def _related_chunks(
    conn: psycopg.Connection,
    principal: Principal,
    delivered: list[DeliveredChunk],
    sources: dict[uuid.UUID, SearchSource],
    levels: dict[uuid.UUID, Level],
) -> list[DeliveredChunk]:
    anchors = [d for d in delivered if d.source.kind is SourceKind.CODEBASE and d.row["symbol"]]
    anchor_ids = [d.row["id"] for d in anchors[:3]]
    edges = store.neighbours(
        conn,
        org_id=principal.org_id,
        source_ids=list({d.source.id for d in anchors[:3]}),
        anchors=anchor_ids,
    )
    picks = pick_related(anchor_ids, edges, exclude={d.row["id"] for d in delivered})
    rows = sources_store.chunks_by_id(
        conn,
        org_id=principal.org_id,
        ids=[p.chunk_id for p in picks],
        versions=_versions(sources.values()),
    )
    related = []
    for pick in picks:
        row = rows.get(pick.chunk_id)
        if row is None:
            continue
        source = sources[row["source_id"]]
        related.append(
            DeliveredChunk(
                row=row,
                source=source,
                level=levels[source.space_id],
                score=0.0,
                related_to=pick.related_to,
                related_relation=pick.relation,
            )
        )
    return related


def attribution_event(
    principal: Principal,
    request: RetrieveQuery,
    answer: RetrieveAnswer,
    *,
    client: tuple[str, str] | None,
) -> dict[str, Any]:
    """The evidence record of a retrieval (integers and strings only: canonical JSON)."""
    chunks = []
    for chunk in answer.chunks:
        entry = {
            "chunkId": str(chunk.row["id"]),
            "sourceId": str(chunk.source.id),
            "sha256": bytes(chunk.row["content_sha256"]).hex(),
            "indexVersion": chunk.row["index_version"],
            "tokens": chunk.tokens,
        }
        if chunk.related_to is not None:
            entry["relatedTo"] = str(chunk.related_to)
        entry.update(memory_fields(chunk.row["metadata"]))  # team memory: entry, rev
        chunks.append(entry)
    return {
        "recordId": str(uuid.uuid4()),
        "category": ATTRIBUTION_CATEGORY,
        "orgId": str(principal.org_id),
        "record": {
            "requestId": answer.request_id,
            "attributionId": str(answer.attribution_id),
            "userId": principal.user_id,
            "spaceId": request.space_id,
            "lensId": request.lens_id,
            "sessionId": request.session_id,
            "sourceIds": sorted({str(c.source.id) for c in answer.chunks}),
            "chunks": chunks,
            "tokensUsed": answer.tokens_used,
            "searchMode": answer.search_mode.value,
            "client": {
                "clientId": principal.client_id,
                "clientName": client[0] if client else None,
                "clientVersion": client[1] if client else None,
            },
            "deliveredAt": format_timestamp(datetime.now(UTC)),
        },
    }


def retrieve(
    conn: psycopg.Connection,
    principal: Principal,
    request: RetrieveQuery,
    *,
    client_header: tuple[str, str] | None,
    deps: Dependencies,
) -> RetrieveAnswer:
    # One round trip: the chain, its sources and the query's terms over them (whichever of
    # those the caller may search: the chain says, after), the DLP policy, the level weights,
    # whether pgvector is there for the pgvector backend, and last the request's count against
    # its rate limits (its rows stay locked until the Sync).
    #
    # The query is searched redacted, as the full-text index holds redacted text: a query naming
    # a secret finds what one naming a wrong value finds. Its terms travel before the policy is
    # read, so they are those of the query redacted by the built-in detectors; the organisation's
    # own patterns, when they redact more of it, have its terms counted again (a round trip more).
    space_id, kinds = request.space_uuid(), request.kinds()
    pgvector_backend = deps.settings.search_backend is SearchBackend.PGVECTOR
    builtin_text = redacted((), request.query, stage="query")
    with step("retrieve.chain"):
        with conn.pipeline():
            chain = pending_search_spaces(conn, principal, space_id)
            chain_sources = pending_chain_sources(conn, principal, space_id, kinds)
            chain_terms = pending_chain_terms(conn, principal, space_id, kinds, builtin_text)
            stored_policy = pending_policy(conn, org_id=principal.org_id)
            stored_weights = pending_weights(conn, principal.org_id, deps.settings)
            pgvector = pending_pgvector_available(conn) if pgvector_backend else None
            admitted = deps.count_request(conn) if deps.count_request else None
        if admitted is not None:
            admitted.result()  # over a rate limit: 429 before anything read is used
        if pgvector is not None:
            # Every retrieval, not only one with a query vector (full-text only: no endpoint,
            # the endpoint down, nothing to search): the operator chose this backend, so it
            # fails closed.
            require_pgvector(pgvector)
        spaces, policy, weights = chain.result(), stored_policy.result(), stored_weights.result()
        searchable = searchable_sources(chain_sources.result(), spaces)
    text = (
        redacted(policy.patterns, request.query, stage="query") if policy.patterns else builtin_text
    )
    levels = {s.id: s.level for s in spaces}
    found = [s for s in searchable if not policy.withholds(s.classification)]
    withheld = [s for s in searchable if policy.withholds(s.classification)]
    sources = {s.id: s for s in found}
    gate = open_gate(
        conn,
        org_id=principal.org_id,
        client=deps.embedder,
        settings=deps.settings,
        policy=policy,
    )
    with step("retrieve.search"):
        if found:
            if text != builtin_text:  # the organisation's patterns redact more: count its terms
                chain_terms = pending_chain_terms(conn, principal, space_id, kinds, text)
            candidates, query = _search(
                conn, principal, spaces, found, text, gate, deps, chain_terms, policy
            )
        else:
            candidates, query = [], without_embedding(gate)
    # Nothing found by full-text alone: say so when the query had no term to find (a statement
    # more on this path only).
    termless = bool(found) and not candidates and query.vector is None and not has_terms(conn, text)
    with step("retrieve.rank"):
        ranked = _ranked_chunks(conn, principal, candidates, sources, levels, request, weights)
    with step("retrieve.budget"):
        delivery = Delivery(policy)
        offered = [_as_delivered(c, delivery) for c in ranked]
        texts: set[bytes] = set()  # the SHA-256 of every text delivered: each is delivered once
        delivered, used = fit_to_budget(
            offered, request.token_budget, _tokens, digest_of=_delivered_sha256, delivered=texts
        )
    if not request.exclude_related and delivered:
        with step("retrieve.related"):
            related = _related_chunks(conn, principal, delivered, sources, levels)
            extra, extra_used = fit_to_budget(
                (_as_delivered(c, delivery) for c in related),
                request.token_budget - used,
                _tokens,
                digest_of=_delivered_sha256,
                delivered=texts,
            )
        delivered, used = delivered + extra, used + extra_used
    answer = RetrieveAnswer(
        request_id=new_request_id(),
        attribution_id=uuid.uuid4(),
        chunks=delivered,
        tokens_used=used,
        sources=sources,
        search_mode=query.mode,
        warnings=_warnings(
            request,
            query,
            spaces,
            searchable,
            withheld,
            offered=offered,
            delivered=delivered,
            termless=termless,
        ),
    )
    with step("retrieve.attribution_event"):
        event = attribution_event(principal, request, answer, client=client_header)
    return replace(answer, event=event)
