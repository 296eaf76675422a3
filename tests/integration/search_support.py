"""The search tests' organisations and published sources, made one way."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import psycopg

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.dlp.classification import Classification
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.sources import service
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.service import Organisation


def admin_of(org: Organisation) -> Principal:
    """A context administrator of ``org``."""
    return Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


def publish_source(
    conn: psycopg.Connection,
    org: Organisation,
    documents: Sequence[Document],
    *,
    embedder: EmbeddingsClient | None = None,
    kind: SourceKind = SourceKind.DOCS,
    name: str = "docs",
    space_id: uuid.UUID | None = None,
) -> uuid.UUID:
    """A new internal source in ``space_id`` (default: ``org``'s organisation space) with
    ``documents`` published as its current index version; its id."""
    admin = admin_of(org)
    source = service.create_source(
        conn,
        admin,
        space_id=space_id or org.space_id,
        kind=kind,
        name=name,
        classification=Classification.INTERNAL,
    )
    service.index_snapshot(conn, admin, source["id"], list(documents), embedder=embedder)
    return source["id"]
