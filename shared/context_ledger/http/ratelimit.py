"""Every request of every API function counted against its rate limits; over one: ``429``.

``create_app`` puts :func:`request_quota`'s dependency in front of every route, so no router can
forget it. It runs after the credential is verified (it depends on ``current_principal``: a bad
credential is ``401``, never ``429``) and before the route's own work, with one statement on a
pooled connection it gives back before the handler takes its own. A refused request answers
``429 rate_limited`` with ``Retry-After``: the whole seconds until the request would be admitted.

The limits are read from the settings on each request (``KEYSTONE_RATE_LIMIT_*``; the memory
API adds ``VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE`` per credential, declared in ``http/memory.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Request

from context_ledger.auth.authorizer import bearer_token
from context_ledger.auth.principal import Principal
from context_ledger.db import autocommit, get_pool
from context_ledger.errors import ApiError, UnauthorizedError
from context_ledger.http.principal import current_principal
from context_ledger.log import logger
from context_ledger.ratelimit import store
from context_ledger.ratelimit.buckets import BucketKind, request_buckets
from context_ledger.ratelimit.store import Verdict
from context_ledger.settings import Settings, get_settings

#: A function's own per-credential limit (requests per minute, 0: none) from the settings.
CredentialLimit = Callable[[Settings], int]

_LIMITED = {
    BucketKind.ORGANISATION: "your organisation's limit of {rate} requests per minute",
    BucketKind.API_KEY: "this API key's limit of {rate} requests per minute",
    BucketKind.CREDENTIAL: "{rate} requests per minute with this credential",
}


class RateLimitedError(ApiError):
    """Over a rate limit; ``Retry-After`` says when the next request will be admitted."""

    status = 429
    code = "rate_limited"

    def __init__(self, verdict: Verdict) -> None:
        retry_after = max(1, math.ceil(verdict.wait_seconds))
        limit = _LIMITED[verdict.bucket.kind].format(rate=verdict.bucket.per_minute)
        super().__init__(f"over {limit}; retry in {retry_after} s")
        self.headers = {"Retry-After": str(retry_after)}


def count(request: Request, caller: Principal, credential_limit: CredentialLimit | None) -> None:
    """Count the request against its buckets; raise RateLimitedError if one refuses it."""
    settings = get_settings()
    try:
        credential = bearer_token(dict(request.headers))
    except UnauthorizedError:
        # API Gateway always passes the header its authorizer verified; only a hand-made event
        # (a benchmark's, `context-ledger invoke`'s) lacks it: its API key counts as "".
        credential = ""
    buckets = request_buckets(
        caller,
        credential,
        settings,
        credential_per_minute=credential_limit(settings) if credential_limit else 0,
    )
    if not buckets:
        return
    # One round trip: the statement commits on its own, without BEGIN and COMMIT around it
    # (the pool hands connections out outside a transaction and wants them back that way).
    with get_pool().connection() as conn, autocommit(conn):
        verdicts = store.take(conn, buckets)
    refused = [v for v in verdicts if v.refused]
    if refused:
        worst = max(refused, key=lambda v: v.wait_seconds)
        logger.info(
            "rate limited",
            extra={
                "limit": worst.bucket.kind.value,
                "orgId": str(caller.org_id),
                "waitSeconds": round(worst.wait_seconds, 3),
            },
        )
        raise RateLimitedError(worst)


def request_quota(
    credential_limit: CredentialLimit | None = None,
) -> Callable[..., Coroutine[Any, Any, None]]:
    """The app-wide dependency counting each request (plus ``credential_limit``, if given)."""

    async def count_request(
        request: Request, caller: Annotated[Principal, Depends(current_principal)]
    ) -> None:
        # Blocking on purpose: a Lambda environment serves one request at a time, and the local
        # runtime gives each request a thread and event loop of its own.
        count(request, caller, credential_limit)

    return count_request
