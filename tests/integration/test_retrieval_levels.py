"""Every level of the chain contributes: each level is searched for its own candidates, so many
strong matches at one level never crowd out another level's best (issue: a global top 100 before
the per-level cap left a project with nothing beside a busy organisation wiki)."""

from __future__ import annotations

import pytest

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.cooldown import Cooldown
from context_ledger.db import connection
from context_ledger.dlp.classification import Classification
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.http.retrieve import RetrieveRequest
from context_ledger.local.embeddings_server import serve_embeddings
from context_ledger.retrieval.cache import SearchCache
from context_ledger.retrieval.service import Dependencies, retrieve
from context_ledger.settings import load_settings
from context_ledger.sources import service as sources
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.levels import Level
from context_ledger.spaces.service import create_organisation, create_space

WIKI = [
    Document(
        f"wiki/refunds-{n}.md",
        f"Refund approvals: refund approvals for case {n} follow the refund approvals policy.",
    )
    for n in range(300)
]
PROJECT = [Document("billing/notes.md", "Billing notes: approvals are mostly automatic here.")]


@pytest.fixture
def stand_in():
    with serve_embeddings(dims=64) as server:
        yield server


@pytest.fixture
def admin(db) -> Principal:
    with connection() as conn:
        org = create_organisation(conn, name="Acme")
    return Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


def _source(admin, space_id, name, documents, embedder) -> None:
    with connection() as conn:
        source = sources.create_source(
            conn,
            admin,
            space_id=space_id,
            kind=SourceKind.DOCS,
            name=name,
            classification=Classification.INTERNAL,
        )
        sources.index_snapshot(conn, admin, source["id"], documents, embedder=embedder)


def _chain(admin: Principal, embedder) -> str:
    """An organisation wiki of 300 strong matches, a team with one, a project with one weak."""
    with connection() as conn:
        root = conn.execute(
            "SELECT id FROM spaces WHERE org_id = %s AND level = 'organisation'", (admin.org_id,)
        ).fetchone()["id"]
        team = create_space(conn, admin, name="Payments", level=Level.TEAM, parent_id=root)
        project = create_space(conn, admin, name="Billing", level=Level.PROJECT, parent_id=team.id)
    _source(admin, root, "wiki", WIKI, embedder)
    team_docs = [Document("team.md", "Refund approvals need a lead.")]
    _source(admin, team.id, "team", team_docs, embedder)
    _source(admin, project.id, "billing", PROJECT, embedder)
    return str(project.id)


def _retrieve(admin, space_id, embedder, backend="exact", max_per_level=5):
    deps = Dependencies(
        settings=load_settings(KEYSTONE_CONTEXT_SEARCH_BACKEND=backend),
        cache=SearchCache(),
        embedder=embedder,
        cooldown=Cooldown(),
    )
    request = RetrieveRequest.model_validate(
        {
            "query": "refund approvals",
            "spaceId": space_id,
            "maxPerLevel": max_per_level,
            "excludeRelated": True,
        }
    ).to_query()
    with connection() as conn:
        return retrieve(conn, admin, request, client_header=None, deps=deps)


def _levels(answer) -> list[str]:
    return [chunk.level.value for chunk in answer.chunks]


def test_the_projects_weaker_match_is_delivered_beside_a_busy_organisation_wiki(admin) -> None:
    project = _chain(admin, None)

    answer = _retrieve(admin, project, None)

    assert "billing/notes.md" in [chunk.row["path"] for chunk in answer.chunks]
    assert sorted(_levels(answer)) == ["organisation"] * 5 + ["project", "team"]


@pytest.mark.parametrize("backend", ["exact", "pgvector"])
def test_with_vectors_too_every_level_contributes(admin, stand_in, backend) -> None:
    embedder = EmbeddingsClient(stand_in.url, "hashing-64", dimensions=64)
    project = _chain(admin, embedder)

    answer = _retrieve(admin, project, embedder, backend)

    assert answer.search_mode.value == "hybrid"
    assert "billing/notes.md" in [chunk.row["path"] for chunk in answer.chunks]
    counts = {level: _levels(answer).count(level) for level in set(_levels(answer))}
    assert counts == {"organisation": 5, "team": 1, "project": 1}


def test_each_level_still_gives_at_most_max_per_level(admin) -> None:
    project = _chain(admin, None)

    answer = _retrieve(admin, project, None, max_per_level=2)

    assert sorted(_levels(answer)) == ["organisation"] * 2 + ["project", "team"]
