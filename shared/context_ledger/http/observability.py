"""The caller's organisation's evidence chain: /api/v1/observability (auditors and admins)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BeforeValidator

from context_ledger.attribution.index_check import check_lookup_rows
from context_ledger.auth.principal import SCOPE_AUDIT_READ, Principal
from context_ledger.db import connection
from context_ledger.errors import ForbiddenError, ValidationFailedError
from context_ledger.evidence.chain import org_chain
from context_ledger.evidence.keys import get_key_ring
from context_ledger.evidence.listing import (
    DEFAULT_LIMIT,
    InvalidCursorError,
    Position,
    list_evidence,
)
from context_ledger.evidence.verify_job import verify_chain
from context_ledger.http.models import ApiModel
from context_ledger.http.principal import current_principal

router = APIRouter(prefix="/api/v1/observability", tags=["observability"])


async def auditor(caller: Annotated[Principal, Depends(current_principal)]) -> Principal:
    """The caller, if it holds ``audit:read`` or ``context:admin``; else 403."""
    if not (caller.has_scope(SCOPE_AUDIT_READ) or caller.is_context_admin):
        raise ForbiddenError("the evidence chain needs the audit:read or context:admin scope")
    return caller


Auditor = Annotated[Principal, Depends(auditor)]


class CheckpointResponse(ApiModel):
    sequence: int
    created_at: datetime


class LookupProblemResponse(ApiModel):
    """A lookup row (``attributions`` or ``attribution_links``) its chain entry does not back."""

    table: str
    key: str
    sequence: int
    problem: str


#: Lookup problems listed in one answer (``reason`` counts them all).
MAX_LOOKUP_PROBLEMS = 100


class VerifyResponse(ApiModel):
    chain: str
    ok: bool
    checked: int
    first_bad_sequence: int | None
    reason: str | None
    checkpoint: CheckpointResponse | None
    lookup_problems: list[LookupProblemResponse]


class EvidenceRecord(ApiModel):
    sequence: int
    category: str
    created_at: datetime
    record_id: uuid.UUID
    record: dict[str, Any]


class EvidenceResponse(ApiModel):
    records: list[EvidenceRecord]
    next_cursor: str | None


@router.get("/chain/verify", response_model=VerifyResponse, response_model_by_alias=True)
async def verify_org_chain(caller: Auditor, full: bool = False) -> VerifyResponse:
    keys = get_key_ring()
    with connection() as conn:
        verified = verify_chain(
            conn,
            chain=org_chain(caller.org_id),
            keys=keys,
            full=full,
            index_check=check_lookup_rows,
        )
    result, point = verified.result, verified.checkpoint
    return VerifyResponse(
        chain=result.chain,
        ok=verified.ok,
        checked=result.checked,
        first_bad_sequence=verified.first_bad_seq,
        reason=verified.reason,
        lookup_problems=[
            LookupProblemResponse(
                table=problem.table, key=problem.key, sequence=problem.seq, problem=problem.problem
            )
            for problem in verified.index_problems[:MAX_LOOKUP_PROBLEMS]
        ],
        checkpoint=None
        if point is None
        else CheckpointResponse(sequence=point.seq, created_at=point.created_at),
    )


def _aware(value: datetime | None) -> datetime | None:
    """ISO-8601 without an offset is read as UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _iso_8601(value: Any) -> Any:
    """Only ISO-8601 text: pydantic alone would read a number such as ``0.5`` as Unix time."""
    if isinstance(value, str):
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("not an ISO-8601 date-time") from None
    return value


@router.get("/compliance-evidence", response_model=EvidenceResponse, response_model_by_alias=True)
async def compliance_evidence(
    caller: Auditor,
    category: Literal["context_attribution", "context_attribution_link"] | None = None,
    since: Annotated[datetime | None, Query(alias="from"), BeforeValidator(_iso_8601)] = None,
    until: Annotated[datetime | None, Query(alias="to"), BeforeValidator(_iso_8601)] = None,
    subject_user: Annotated[
        str | None, Query(alias="subjectUser", min_length=1, max_length=255)
    ] = None,
    limit: Annotated[int, Query(ge=1)] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> EvidenceResponse:
    since, until = _aware(since), _aware(until)
    if since is not None and until is not None and since > until:
        raise ValidationFailedError("from must not be after to")
    try:
        after = None if cursor is None else Position.decode(cursor)
    except InvalidCursorError as exc:
        raise ValidationFailedError(f"cursor: {exc}") from None
    with connection() as conn:
        page = list_evidence(
            conn,
            chain=org_chain(caller.org_id),
            category=category,
            since=since,
            until=until,
            subject_user=subject_user,
            limit=limit,
            after=after,
        )
    return EvidenceResponse(
        records=[
            EvidenceRecord(
                sequence=e.seq,
                category=e.category,
                created_at=e.created_at,
                record_id=e.record_id,
                record=e.record,
            )
            for e in page.entries
        ],
        next_cursor=None if page.next_position is None else page.next_position.encode(),
    )
