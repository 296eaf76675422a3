"""Index builds against real PostgreSQL: code graph edges, embeddings through the gate, reuse."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.db import connection
from context_ledger.dlp.classification import Classification
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.local.embeddings_server import serve_embeddings
from context_ledger.sources import service
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.service import Organisation, create_organisation
from context_ledger.spaces.store import organisation_space

GO_PACKAGE = Path(__file__).resolve().parents[1] / "fixtures" / "code_graph" / "go"


@pytest.fixture
def org(db) -> Organisation:
    with connection() as conn:
        return create_organisation(conn, name="Acme")


@pytest.fixture
def admin(org) -> Principal:
    return Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


def new_source(admin: Principal, kind: SourceKind, classification=Classification.INTERNAL):
    with connection() as conn:
        return service.create_source(
            conn,
            admin,
            space_id=organisation_space(conn, org_id=admin.org_id)["id"],
            kind=kind,
            name="src",
            classification=classification,
        )


def index(admin: Principal, source_id: uuid.UUID, documents: list[Document], embedder=None):
    with connection() as conn:
        published = service.index_snapshot(conn, admin, source_id, documents, embedder=embedder)
    with connection() as conn:
        service.drop_superseded(conn, source_id=source_id)
    return published


def go_documents() -> list[Document]:
    return [
        Document(path=str(p.relative_to(GO_PACKAGE)), content=p.read_text())
        for p in sorted(GO_PACKAGE.rglob("*"))
        if p.is_file()
    ]


def edges_of(source_id: uuid.UUID) -> set[tuple[str, str, str]]:
    with connection() as conn:
        rows = conn.execute(
            "SELECT f.symbol AS f, t.symbol AS t, e.relation FROM code_edges e"
            " JOIN chunks f ON f.id = e.from_chunk_id JOIN chunks t ON t.id = e.to_chunk_id"
            " JOIN sources s ON s.id = e.source_id AND s.index_version = e.index_version"
            " WHERE e.source_id = %s",
            (source_id,),
        ).fetchall()
    return {(r["f"], r["t"], r["relation"]) for r in rows}


def test_publishing_a_go_package_links_calls_and_tests(admin) -> None:
    source = new_source(admin, SourceKind.CODEBASE)

    published = index(admin, source["id"], go_documents())

    edges = edges_of(source["id"])
    assert published.counts.edges == len(edges) > 0
    assert ("Refunds.Authorise", "Refunds.withinLimit", "calls") in edges
    assert ("Refunds.Authorise", "TestAuthorise", "tested_by") in edges
    assert ("Refunds.withinLimit", "TestRefunds_withinLimit", "tested_by") in edges
    called_by = {f for f, t, rel in edges if t == "Refunds.withinLimit" and rel == "calls"}
    assert "Refunds.Authorise" in called_by
    with connection() as conn:
        left = conn.execute("SELECT count(*) AS n FROM index_documents").fetchone()
    assert left["n"] == 0, "build documents are dropped once the graph is linked"


def test_a_republished_snapshot_has_only_its_own_edges(admin) -> None:
    source = new_source(admin, SourceKind.CODEBASE)
    index(admin, source["id"], go_documents())
    only_ledger = [d for d in go_documents() if d.path.startswith(("ledger/", "go.mod"))]

    index(admin, source["id"], only_ledger)

    assert all(not f.startswith("Refunds") for f, _, _ in edges_of(source["id"]))


@pytest.fixture
def stand_in():
    with serve_embeddings(dims=64) as server:
        yield server


def embedder_for(server) -> EmbeddingsClient:
    return EmbeddingsClient(server.url, "hashing-64", dimensions=64)


def embedded_inputs(server) -> list[str]:
    return [text for r in server.requests if r.body for text in r.body["input"]]


def test_an_internal_source_is_embedded_at_ingest(admin, stand_in) -> None:
    source = new_source(admin, SourceKind.DOCS)
    docs = [Document("a.md", "Refunds need a receipt."), Document("b.md", "Chargebacks differ.")]

    published = index(admin, source["id"], docs, embedder_for(stand_in))

    assert published.counts.embedded == published.counts.chunks == 2
    assert sorted(embedded_inputs(stand_in)) == ["Chargebacks differ.", "Refunds need a receipt."]
    with connection() as conn:
        rows = conn.execute(
            "SELECT cardinality(embedding) AS dims, embedding_model FROM chunks"
            " WHERE source_id = %s",
            (source["id"],),
        ).fetchall()
    assert {(r["dims"], r["embedding_model"]) for r in rows} == {(64, "hashing-64")}


@pytest.mark.parametrize(
    "classification",
    [Classification.CONFIDENTIAL, Classification.RESTRICTED, Classification.REGULATED],
)
def test_a_protected_source_is_never_sent_to_the_embedder(admin, stand_in, classification) -> None:
    source = new_source(admin, SourceKind.DOCS, classification)

    published = index(
        admin, source["id"], [Document("a.md", "secret plan")], embedder_for(stand_in)
    )

    assert stand_in.requests == []
    assert published.counts.embedded == 0
    assert published.counts.chunks == 1


def test_unchanged_chunks_reuse_their_embeddings_when_reindexed(admin, stand_in) -> None:
    source = new_source(admin, SourceKind.DOCS)
    embedder = embedder_for(stand_in)
    index(admin, source["id"], [Document("a.md", "Same text."), Document("b.md", "Old.")], embedder)
    stand_in.reset()

    published = index(
        admin, source["id"], [Document("a.md", "Same text."), Document("b.md", "New.")], embedder
    )

    assert embedded_inputs(stand_in) == ["New."]
    assert published.counts.embedded == 2
