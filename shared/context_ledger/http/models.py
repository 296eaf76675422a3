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

    @model_validator(mode="before")
    @classmethod
    def _refuse_unstorable_text(cls, data: Any) -> Any:
        refuse_unstorable_text(data)
        return data


def refuse_unstorable_text(value: Any) -> None:
    """ValueError (so 422) for text PostgreSQL cannot store, anywhere in a JSON value: NUL
    characters (``\\u0000``) and lone surrogates (``\\ud800``), which JSON allows."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError("text must not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("text must not contain lone surrogates") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            refuse_unstorable_text(key)
            refuse_unstorable_text(item)
    elif isinstance(value, list):
        for item in value:
            refuse_unstorable_text(item)
