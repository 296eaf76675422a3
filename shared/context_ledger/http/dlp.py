"""The organisation's DLP policy: /api/v1/context/dlp/policy (``context:admin``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field, StrictStr

from context_ledger.auth.principal import Principal
from context_ledger.db import connection
from context_ledger.dlp import policy as dlp_policy
from context_ledger.http.models import ApiModel, RequestModel
from context_ledger.http.principal import current_principal

router = APIRouter(prefix="/api/v1/context/dlp/policy", tags=["dlp"])

Caller = Annotated[Principal, Depends(current_principal)]

#: Bounds that keep one organisation's scan cheap; dlp.redaction checks each pattern's syntax.
MAX_PATTERNS = 50
MAX_PATTERN_LENGTH = 1000


class PatternModel(RequestModel):
    """A custom redaction pattern: matches become ``[REDACTED:custom_<name>]``."""

    name: StrictStr = Field(min_length=1, max_length=40)
    pattern: StrictStr = Field(min_length=1, max_length=MAX_PATTERN_LENGTH)


class PutPolicyRequest(RequestModel):
    """The new policy. Classifications left out of ``actions`` return to their defaults, so
    ``{}`` resets the whole policy. Values stay as sent: ``dlp.policy.parse_actions`` refuses
    anything but a known action name."""

    actions: dict[str, Any] = Field(default_factory=dict)
    patterns: list[PatternModel] = Field(default_factory=list, max_length=MAX_PATTERNS)
    #: classifications no caller receives (none by default); ``dlp.policy.parse_withheld``
    #: refuses an unknown one
    withheld: list[StrictStr] = Field(default_factory=list, max_length=10)


class PatternResponse(ApiModel):
    name: str
    pattern: str


class PolicyResponse(ApiModel):
    defaults: dict[str, str]
    overrides: dict[str, str]
    effective: dict[str, str]
    patterns: list[PatternResponse]
    withheld: list[str]

    @classmethod
    def of(cls, found: dlp_policy.DlpPolicy) -> PolicyResponse:
        return cls(
            defaults={c.value: a.value for c, a in dlp_policy.DEFAULT_ACTIONS.items()},
            overrides=found.overrides,
            effective={c.value: a.value for c, a in found.actions.items()},
            patterns=[PatternResponse(name=p.name, pattern=p.pattern) for p in found.patterns],
            withheld=sorted(c.value for c in found.withheld),
        )


@router.get("", response_model=PolicyResponse, response_model_by_alias=True)
async def get_policy(caller: Caller) -> PolicyResponse:
    with connection() as conn:
        found = dlp_policy.get_policy(conn, caller)
    return PolicyResponse.of(found)


@router.put("", response_model=PolicyResponse, response_model_by_alias=True)
async def put_policy(body: PutPolicyRequest, caller: Caller) -> PolicyResponse:
    with connection() as conn:
        found = dlp_policy.replace_policy(
            conn,
            caller,
            actions=body.actions,
            patterns=[p.model_dump() for p in body.patterns],
            withheld=body.withheld,
        )
    return PolicyResponse.of(found)
