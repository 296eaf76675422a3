"""Use cases on sources and index builds, with their permission rules.

Reading a source needs any permission on its space (a searcher sees which sources it searches);
creating, deleting and indexing need ``context:space:admin``. A source the caller cannot see is
``404 context.source.not_found``, like one of another organisation.

A source's name is served as retrieval's ``sourcesSummary`` serves it: redacted unless its
classification's action is ``allow`` (``dlp/delivery.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from context_ledger.auth.principal import Principal
from context_ledger.dlp.classification import Classification
from context_ledger.dlp.delivery import Delivery
from context_ledger.dlp.gate import open_gate
from context_ledger.dlp.policy import load_policy
from context_ledger.embeddings.client import EmbeddingsClient
from context_ledger.errors import ConflictError, NotFoundError, SpaceNotFoundError
from context_ledger.settings import get_settings
from context_ledger.sources import indexer, store
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.permissions import Permission
from context_ledger.spaces.service import authorize_space


class SourceNotFoundError(NotFoundError):
    """The source does not exist in the caller's organisation or is hidden from the caller."""

    code = "context.source.not_found"

    def __init__(self) -> None:
        super().__init__("source not found")


class IndexVersionNotFoundError(NotFoundError):
    """No such index version of the source."""

    code = "context.index_version.not_found"

    def __init__(self) -> None:
        super().__init__("index version not found")


class IndexVersionConflictError(ConflictError):
    """The index version is not an open build, or is older than the published one."""

    code = "context.index_version.conflict"


@dataclass(frozen=True)
class Published:
    version: store.Row
    counts: indexer.BuildCounts


def parse_source_id(raw: str) -> uuid.UUID:
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise SourceNotFoundError() from None


def _delivered(
    conn: psycopg.Connection, principal: Principal, rows: list[store.Row]
) -> list[store.Row]:
    """The source rows as a caller receives them: names redacted by the organisation's policy."""
    delivery = Delivery(load_policy(conn, org_id=principal.org_id))
    return [{**row, "name": delivery.text(row["classification"], row["name"])} for row in rows]


def create_source(
    conn: psycopg.Connection,
    principal: Principal,
    *,
    space_id: uuid.UUID,
    kind: SourceKind,
    name: str,
    classification: Classification,
) -> store.Row:
    authorize_space(conn, principal, space_id, Permission.ADMIN, action="adding a source")
    row = store.insert_source(
        conn,
        org_id=principal.org_id,
        space_id=space_id,
        kind=kind.value,
        name=name,
        classification=classification.value,
    )
    return _delivered(conn, principal, [row])[0]


def list_sources(
    conn: psycopg.Connection, principal: Principal, *, space_id: uuid.UUID
) -> list[store.Row]:
    authorize_space(conn, principal, space_id, Permission.SEARCH, action="listing sources")
    rows = store.list_sources(conn, org_id=principal.org_id, space_id=space_id)
    return _delivered(conn, principal, rows)


def _source(
    conn: psycopg.Connection,
    principal: Principal,
    source_id: uuid.UUID,
    permission: Permission,
    *,
    action: str,
    lock: bool = False,
) -> store.Row:
    row = store.get_source(conn, org_id=principal.org_id, source_id=source_id, lock=lock)
    if row is None:
        raise SourceNotFoundError()
    try:
        authorize_space(conn, principal, row["space_id"], permission, action=action)
    except SpaceNotFoundError:
        raise SourceNotFoundError() from None
    return row


def get_source(conn: psycopg.Connection, principal: Principal, source_id: uuid.UUID) -> store.Row:
    row = _source(conn, principal, source_id, Permission.SEARCH, action="reading a source")
    return _delivered(conn, principal, [row])[0]


def delete_source(conn: psycopg.Connection, principal: Principal, source_id: uuid.UUID) -> None:
    """Delete the source; its chunks stop being searchable when this transaction commits."""
    _source(conn, principal, source_id, Permission.ADMIN, action="deleting a source", lock=True)
    store.delete_source(conn, org_id=principal.org_id, source_id=source_id)


def list_versions(
    conn: psycopg.Connection, principal: Principal, source_id: uuid.UUID
) -> list[store.Row]:
    _source(conn, principal, source_id, Permission.SEARCH, action="reading index versions")
    return store.list_versions(conn, source_id=source_id)


def open_build(conn: psycopg.Connection, principal: Principal, source_id: uuid.UUID) -> store.Row:
    _source(conn, principal, source_id, Permission.ADMIN, action="indexing", lock=True)
    return store.open_version(conn, source_id=source_id)


def _target(source: store.Row, version: int) -> indexer.BuildTarget:
    return indexer.BuildTarget(
        org_id=source["org_id"],
        source_id=source["id"],
        kind=SourceKind(source["kind"]),
        classification=Classification(source["classification"]),
        version=version,
        published_version=source["index_version"],
    )


def _open_build(conn: psycopg.Connection, source: store.Row, version: int) -> store.Row:
    row = store.get_version(conn, source_id=source["id"], version=version)
    if row is None:
        raise IndexVersionNotFoundError()
    if row["state"] != "building":
        raise IndexVersionConflictError(f"index version {version} is {row['state']}, not open")
    return row


def add_build_documents(
    conn: psycopg.Connection,
    principal: Principal,
    source_id: uuid.UUID,
    version: int,
    documents: Sequence[Document],
    *,
    embedder: EmbeddingsClient | None,
) -> indexer.BatchStats:
    source = _source(conn, principal, source_id, Permission.ADMIN, action="indexing", lock=True)
    _open_build(conn, source, version)
    gate = open_gate(conn, org_id=principal.org_id, client=embedder, settings=get_settings())
    return indexer.add_documents(conn, _target(source, version), documents, gate=gate)


def publish_build(
    conn: psycopg.Connection, principal: Principal, source_id: uuid.UUID, version: int
) -> Published:
    """Link the build's code graph and make it the version searches serve (one transaction).

    The caller drops the superseded version's rows after committing (``drop_superseded``).
    """
    source = _source(conn, principal, source_id, Permission.ADMIN, action="indexing", lock=True)
    _open_build(conn, source, version)
    if version < source["index_version"]:
        raise IndexVersionConflictError(
            f"index version {version} is older than the published version {source['index_version']}"
        )
    counts = indexer.finish_build(conn, source_id=source_id, version=version)
    row = store.publish_version(conn, source_id=source_id, version=version, edges=counts.edges)
    return Published(version=row, counts=counts)


def abort_build(
    conn: psycopg.Connection, principal: Principal, source_id: uuid.UUID, version: int
) -> store.Row:
    """Give up an open build: its rows are deleted and it can never be published. The version
    searches serve is untouched. ``context-ledger ingest`` calls it when a step fails."""
    source = _source(conn, principal, source_id, Permission.ADMIN, action="indexing", lock=True)
    _open_build(conn, source, version)
    store.discard_build(conn, source_id=source_id, version=version)
    return store.abort_version(conn, source_id=source_id, version=version)


def index_snapshot(
    conn: psycopg.Connection,
    principal: Principal,
    source_id: uuid.UUID,
    documents: Sequence[Document],
    *,
    embedder: EmbeddingsClient | None,
) -> Published:
    """Build and publish a full snapshot in one call (small sources)."""
    version = open_build(conn, principal, source_id)["version"]
    add_build_documents(conn, principal, source_id, version, documents, embedder=embedder)
    return publish_build(conn, principal, source_id, version)


def drop_superseded(conn: psycopg.Connection, *, source_id: uuid.UUID) -> int:
    return store.drop_superseded_chunks(conn, source_id=source_id)
