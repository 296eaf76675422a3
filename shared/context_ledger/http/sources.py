"""Sources and index builds: /api/v1/context/spaces/{spaceId}/sources, /api/v1/context/sources."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from pydantic import Field, StringConstraints, field_validator

from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.dlp.classification import Classification
from context_ledger.embeddings.client import get_embeddings_client
from context_ledger.http.models import ApiModel, RequestModel
from context_ledger.http.principal import current_principal
from context_ledger.sources import service
from context_ledger.sources.model import MAX_PATH_CHARS, Document, SourceKind
from context_ledger.spaces.service import parse_space_id

router = APIRouter(tags=["sources"])

#: Lambda's synchronous payload limit; larger snapshots use an index build in batches.
MAX_BODY_BYTES = 6_000_000
MAX_DOCUMENT_CHARS = 2_000_000

Caller = Annotated[Principal, Depends(current_principal)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class CreateSourceRequest(RequestModel):
    kind: SourceKind
    name: Name
    classification: Classification = Classification.INTERNAL


class DocumentIn(RequestModel):
    path: Annotated[
        str, StringConstraints(min_length=1, max_length=MAX_PATH_CHARS, pattern=r"^[^\x00]+$")
    ]
    content: Annotated[str, Field(max_length=MAX_DOCUMENT_CHARS)]
    language: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_+#.-]{1,32}$")] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("path", "content")
    @classmethod
    def _encodable(cls, value: str) -> str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("must be valid Unicode (no lone surrogates)") from None
        return value

    def to_document(self) -> Document:
        return Document(self.path, self.content.replace("\x00", ""), self.language, self.metadata)


class DocumentsRequest(RequestModel):
    documents: Annotated[list[DocumentIn], Field(max_length=10_000)]

    @field_validator("documents")
    @classmethod
    def _distinct_paths(cls, documents: list[DocumentIn]) -> list[DocumentIn]:
        """Two documents of one path in one request are a mistake of the client's (which of
        them did it mean?): 422, rather than one silently winning. The same path in a later
        batch of a build replaces the earlier one's chunks, so a retried batch stays harmless."""
        seen: dict[str, int] = {}
        for index, document in enumerate(documents):
            first = seen.setdefault(document.path, index)
            if first != index:
                raise ValueError(
                    f"documents {first} and {index} have the same path {document.path!r};"
                    " send each path once per request"
                )
        return documents


class SourceResponse(ApiModel):
    id: uuid.UUID
    space_id: uuid.UUID
    kind: SourceKind
    name: str
    classification: Classification
    index_version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: dict[str, Any]) -> SourceResponse:
        return cls(**{name: row[name] for name in cls.model_fields})


class SourceListResponse(ApiModel):
    sources: list[SourceResponse]


class IndexVersionResponse(ApiModel):
    version: int
    state: str
    documents: int
    chunks: int
    tokens: int
    edges: int
    embedded: int
    created_at: datetime
    published_at: datetime | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> IndexVersionResponse:
        return cls(
            version=row["version"],
            state=row["state"],
            documents=row["document_count"],
            chunks=row["chunk_count"],
            tokens=row["token_count"],
            edges=row["edge_count"],
            embedded=row["embedded_count"],
            created_at=row["created_at"],
            published_at=row["published_at"],
        )


class IndexVersionListResponse(ApiModel):
    versions: list[IndexVersionResponse]


class BatchResponse(ApiModel):
    version: int
    documents: int
    chunks: int
    tokens: int
    embedded: int
    reused_embeddings: int


def _documents(body: DocumentsRequest) -> list[Document]:
    return [d.to_document() for d in body.documents]


def _version_number(raw: str) -> int:
    # isascii: str.isdigit() also holds for digits int() refuses, such as "²".
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise service.IndexVersionNotFoundError()
    return int(raw)


def _publish(caller: Principal, source_id: uuid.UUID, version: int) -> IndexVersionResponse:
    with connection() as conn:
        published = service.publish_build(conn, caller, source_id, version)
    with connection() as conn:  # after the flip committed: old rows are no longer served
        service.drop_superseded(conn, source_id=source_id)
    return IndexVersionResponse.of(published.version)


@router.post(
    "/api/v1/context/spaces/{space_id}/sources", status_code=201, response_model=SourceResponse
)
async def create_source(space_id: str, body: CreateSourceRequest, caller: Caller) -> SourceResponse:
    with connection() as conn:
        row = service.create_source(
            conn,
            caller,
            space_id=parse_space_id(space_id),
            kind=body.kind,
            name=body.name,
            classification=body.classification,
        )
    return SourceResponse.of(row)


@router.get("/api/v1/context/spaces/{space_id}/sources", response_model=SourceListResponse)
async def list_sources(space_id: str, caller: Caller) -> SourceListResponse:
    with connection() as conn:
        rows = service.list_sources(conn, caller, space_id=parse_space_id(space_id))
    return SourceListResponse(sources=[SourceResponse.of(r) for r in rows])


@router.get("/api/v1/context/sources/{source_id}", response_model=SourceResponse)
async def get_source(source_id: str, caller: Caller) -> SourceResponse:
    with connection() as conn:
        row = service.get_source(conn, caller, service.parse_source_id(source_id))
    return SourceResponse.of(row)


@router.delete("/api/v1/context/sources/{source_id}", status_code=204, response_class=Response)
async def delete_source(source_id: str, caller: Caller) -> Response:
    with connection() as conn:
        service.delete_source(conn, caller, service.parse_source_id(source_id))
    return Response(status_code=204)


@router.put("/api/v1/context/sources/{source_id}/index", response_model=IndexVersionResponse)
async def index_snapshot(
    source_id: str, body: DocumentsRequest, caller: Caller
) -> IndexVersionResponse:
    sid = service.parse_source_id(source_id)
    with connection() as conn:
        published = service.index_snapshot(
            conn, caller, sid, _documents(body), embedder=get_embeddings_client()
        )
    with connection() as conn:
        service.drop_superseded(conn, source_id=sid)
    return IndexVersionResponse.of(published.version)


@router.get(
    "/api/v1/context/sources/{source_id}/index-versions", response_model=IndexVersionListResponse
)
async def list_versions(source_id: str, caller: Caller) -> IndexVersionListResponse:
    with connection() as conn:
        rows = service.list_versions(conn, caller, service.parse_source_id(source_id))
    return IndexVersionListResponse(versions=[IndexVersionResponse.of(r) for r in rows])


@router.post(
    "/api/v1/context/sources/{source_id}/index-versions",
    status_code=201,
    response_model=IndexVersionResponse,
)
async def open_build(source_id: str, caller: Caller) -> IndexVersionResponse:
    with connection() as conn:
        row = service.open_build(conn, caller, service.parse_source_id(source_id))
    return IndexVersionResponse.of(row)


@router.post(
    "/api/v1/context/sources/{source_id}/index-versions/{version}/documents",
    response_model=BatchResponse,
)
async def add_documents(
    source_id: str, version: str, body: DocumentsRequest, caller: Caller
) -> BatchResponse:
    number = _version_number(version)
    with connection() as conn:
        stats = service.add_build_documents(
            conn,
            caller,
            service.parse_source_id(source_id),
            number,
            _documents(body),
            embedder=get_embeddings_client(),
        )
    return BatchResponse(
        version=number,
        documents=stats.documents,
        chunks=stats.chunks,
        tokens=stats.tokens,
        embedded=stats.embedded,
        reused_embeddings=stats.reused_embeddings,
    )


@router.post(
    "/api/v1/context/sources/{source_id}/index-versions/{version}/publish",
    response_model=IndexVersionResponse,
)
async def publish(source_id: str, version: str, caller: Caller) -> IndexVersionResponse:
    return _publish(caller, service.parse_source_id(source_id), _version_number(version))


@router.post(
    "/api/v1/context/sources/{source_id}/index-versions/{version}/abort",
    response_model=IndexVersionResponse,
)
async def abort(source_id: str, version: str, caller: Caller) -> IndexVersionResponse:
    with connection() as conn:
        row = service.abort_build(
            conn, caller, service.parse_source_id(source_id), _version_number(version)
        )
    return IndexVersionResponse.of(row)
