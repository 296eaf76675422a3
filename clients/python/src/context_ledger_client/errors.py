"""Every failure of a call is a :class:`ContextLedgerError`: an API answer carries the API's own
``code``, ``message`` and HTTP ``status``; a service that cannot be reached is a
:class:`ServiceUnreachableError`, which is also a built-in :class:`ConnectionError`. No httpx
exception ever leaves the client, so callers depend on this module only.
"""

from __future__ import annotations


class ContextLedgerError(Exception):
    """The API refused or failed a call (the base of every error of this client)."""

    def __init__(self, message: str, *, status: int | None, code: str) -> None:
        super().__init__(f"{status} {code}: {message}" if status else f"{code}: {message}")
        self.message = message
        self.status = status
        self.code = code


class ValidationError(ContextLedgerError):
    """400 or 422: the request broke a rule; ``message`` names the field."""


class AuthenticationError(ContextLedgerError):
    """401: no credential, or one that does not verify (expired, revoked, wrong key)."""


class PermissionDeniedError(ContextLedgerError):
    """403: the caller sees the resource but lacks the permission or scope."""


class NotFoundError(ContextLedgerError):
    """404: unknown, another organisation's, or hidden from the caller (not told apart)."""


class RateLimitedError(ContextLedgerError):
    """429 after the client's retries: ``retry_after`` is the server's advice in seconds, if any."""

    def __init__(
        self, message: str, *, status: int | None, code: str, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status=status, code=code)
        self.retry_after = retry_after


class ServiceUnavailableError(ContextLedgerError):
    """503 after the client's retries (attribution not queued, DLP scan failed, database down)."""


class ServiceUnreachableError(ContextLedgerError, ConnectionError):
    """No HTTP answer at all: refused, unresolvable, timed out or dropped; ``url`` says where."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach {url}: {reason}", status=None, code="unreachable")
        self.url = url
        self.reason = reason


_BY_STATUS: dict[int, type[ContextLedgerError]] = {
    400: ValidationError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    422: ValidationError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}

#: API Gateway answers some refusals itself, with ``{"message": ...}`` and no code.
_GATEWAY_CODES = {401: "unauthorized", 403: "forbidden", 429: "rate_limited"}


def error_for(
    status: int, body: object, *, fallback_text: str, retry_after: float | None
) -> ContextLedgerError:
    """The exception for a non-2xx answer: the API's ``{"error": {"code", "message"}}`` body, API
    Gateway's ``{"message"}``, or the status and the start of the body for anything else."""
    code, message = _GATEWAY_CODES.get(status, f"http_{status}"), fallback_text[:200]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            code, message = error["code"], str(error.get("message", ""))
        elif isinstance(body.get("message"), str):
            message = body["message"]
    cls = _BY_STATUS.get(status, ContextLedgerError)
    if cls is RateLimitedError:
        return RateLimitedError(message, status=status, code=code, retry_after=retry_after)
    return cls(message, status=status, code=code)
