"""The memory API's per-credential rate limit (spec: ``429`` when rate limited).

Each API key, and each user's OAuth client for bearer tokens, gets
``VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE`` requests per 60-second window, the window starting at its
first request. Counted in the database, so every Lambda container shares one count per key. The
counter is keyed by a SHA-256, never by the credential itself; tokens are counted per user and
client rather than per token, so a freshly issued token does not start a new window (and rows do
not pile up with every token issued).
"""

from __future__ import annotations

import hashlib
import math

import psycopg

from context_ledger.auth.principal import AuthMethod, Principal
from context_ledger.errors import ApiError
from context_ledger.memory import store


class RateLimitedError(ApiError):
    """The credential made more requests than its limit in the current window."""

    status = 429
    code = "rate_limited"


def rate_key(principal: Principal, credential: str) -> bytes:
    """What the limit counts against: the API key itself, or the token's user and client."""
    if principal.auth_method is AuthMethod.API_KEY:
        subject = f"key:{credential}"
    else:
        subject = f"token:{principal.org_id}:{principal.user_id}:{principal.client_id or ''}"
    return hashlib.sha256(subject.encode()).digest()


def enforce_rate_limit(
    conn: psycopg.Connection, *, principal: Principal, credential: str, per_minute: int
) -> None:
    """Count this request; raise RateLimitedError when it is over the limit (0: no limit)."""
    if per_minute <= 0:
        return
    window = store.count_request(conn, key_sha256=rate_key(principal, credential))
    if window["requests"] > per_minute:
        retry = max(1, math.ceil(window["seconds_left"]))
        raise RateLimitedError(
            f"over {per_minute} requests in 60 seconds with this credential; retry in {retry} s"
        )
