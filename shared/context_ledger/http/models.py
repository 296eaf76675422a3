"""Base models for request and response bodies: camelCase on the wire, strict on input."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from context_ledger.http.principal import ORG_KEYS, USER_KEYS


class ApiModel(BaseModel):
    """Response bodies: snake_case in Python, camelCase in JSON."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class RequestModel(ApiModel):
    """Request bodies refuse unknown fields (no mass assignment).

    Identity fields are the one exception: they were already checked against the token by
    ``current_principal`` (a foreign one is 403), so a body repeating the caller's own identity
    is accepted and the field ignored.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=False, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_identity_fields(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k not in ORG_KEYS | USER_KEYS}
        return data
