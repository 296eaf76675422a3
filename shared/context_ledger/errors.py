"""Errors that reach a client, and the one JSON body they all use.

Every non-2xx answer is ``{"error": {"code": "...", "message": "..."}}``. Codes are the spec's
(``context.space.not_found``, ``invalid_request``, ...) where the spec names one. Messages are
written for the caller: never a stack trace, SQL, URL or key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any


class ApiError(Exception):
    """An error with an HTTP status and a stable code, safe to show to the caller."""

    status: int = 500
    code: str = "internal_error"
    #: response headers the answer carries (a 429's ``Retry-After``)
    headers: dict[str, str]

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.headers = {}
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message)


class InvalidRequestError(ApiError):
    """The request is malformed (bad header, bad JSON)."""

    status = 400
    code = "invalid_request"


class ValidationFailedError(ApiError):
    """The request is well-formed but a field breaks a rule."""

    status = 422
    code = "validation_failed"


class UnauthorizedError(ApiError):
    """No credential, or one that does not verify."""

    status = 401
    code = "unauthorized"


class ForbiddenError(ApiError):
    """The caller is known but lacks the permission, or named another organisation or user."""

    status = 403
    code = "forbidden"


class NotFoundError(ApiError):
    """Unknown or foreign object: the two are indistinguishable on purpose."""

    status = 404
    code = "not_found"


class SpaceNotFoundError(NotFoundError):
    """The space does not exist in the caller's organisation (or the id is not a UUID)."""

    code = "context.space.not_found"

    def __init__(self, message: str = "space not found"):
        super().__init__(message)


class PayloadTooLargeError(ApiError):
    """The request body exceeds the endpoint's limit."""

    status = 413
    code = "payload_too_large"


class ServiceUnavailableError(ApiError):
    """A dependency the answer needs is down; the request can be retried."""

    status = 503
    code = "service_unavailable"


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


class ConflictError(ApiError):
    """The request conflicts with the object's current state."""

    status = 409
    code = "conflict"


def validation_message(errors: Iterable[Mapping[str, Any]], *, skip: str = "body") -> str:
    """``field: problem; ...`` for the first five of pydantic's errors: the message of a
    ``422 validation_failed`` (the API's and the MCP tools'), naming fields, never their values."""
    parts = []
    for item in list(errors)[:5]:
        where = ".".join(shown_name(p) for p in item.get("loc", ()) if p != skip) or skip
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "; ".join(parts)


#: The longest field name a message repeats whole (an unknown key can be any length).
MAX_NAMED = 64
#: What a message says for a name it does not repeat.
UNSHOWN_NAME = "(a field whose name is not repeated)"
# Every field of the API is named in letters, '_' and '-' (camelCase, snake_case), as a list's
# position is a number; a name with digits, symbols or blanks is no field of ours but a key
# the caller chose (an unknown field, a key of a map), which can be a pasted value.
_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z_\-]*")


def shown_name(part: object) -> str:
    """A field's name (or position) as an error message repeats it: whole when shaped like
    the API's field names, cut at :data:`MAX_NAMED` characters, else :data:`UNSHOWN_NAME`."""
    if isinstance(part, int):
        return str(part)
    name = str(part)
    if _FIELD_NAME.fullmatch(name) is None:
        return UNSHOWN_NAME
    return name if len(name) <= MAX_NAMED else f"{name[:MAX_NAMED]}…"
