"""Every request of every API function counted against its rate limits; over one: ``429``.

``create_app`` puts :func:`request_quota`'s dependency in front of every route, so no router can
forget it. It runs after the credential is verified (it depends on ``current_principal``: a bad
credential is ``401``, never ``429``) and before the route's own work, with one statement on a
pooled connection it gives back before the handler takes its own. A refused request answers
``429 rate_limited`` with ``Retry-After``: the whole seconds until the request would be admitted.

A route marked :func:`counted_by_route` counts its request itself: the retrieve use case sends
the statement last in its first pipeline (``Quota.send``: one round trip less; over the limit, it
answers 429 before anything else it read is used), and the embeddings endpoint counts each input
of a call once it has read them (``Quota.take(cost=...)``: 2,048 inputs are 2,048 requests'
worth, not one). A request that ends before the route counts it (an invalid body: 422) is counted
once when it ends, its answer unchanged; one the database failed (503) is not, as counting it
would wait for the unreachable database a second time.

The limits are read from the settings on each request (``KEYSTONE_RATE_LIMIT_*``; the memory
API adds ``VENKAI_MEMORY_RATE_LIMIT_PER_MINUTE`` per credential, declared in ``http/memory.py``).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, TypeVar

import psycopg
from fastapi import Depends, Request

from context_ledger.auth.authorizer import bearer_token
from context_ledger.auth.principal import Principal
from context_ledger.db import autocommit, get_pool
from context_ledger.db.pending import Pending
from context_ledger.db.pool import is_unavailable
from context_ledger.errors import ApiError, UnauthorizedError
from context_ledger.http.principal import current_principal
from context_ledger.log import logger
from context_ledger.ratelimit import store
from context_ledger.ratelimit.buckets import Bucket, BucketKind, request_buckets
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

    def __init__(self, verdict: Verdict, cost: int = 1) -> None:
        retry_after = max(1, math.ceil(verdict.wait_seconds))
        limit = _LIMITED[verdict.bucket.kind].format(rate=verdict.bucket.per_minute)
        counted = f" (this request counts as {cost})" if cost > 1 else ""
        super().__init__(f"over {limit}{counted}; retry in {retry_after} s")
        self.headers = {"Retry-After": str(retry_after)}


class Quota:
    """One request's count against its buckets, taken once: at once on a pooled connection
    (:meth:`take`), or sent by the route with its own first round trip (:meth:`send`)."""

    def __init__(self, caller: Principal, buckets: list[Bucket]) -> None:
        self._caller = caller
        self._buckets = buckets
        self.taken = False

    def take(self, cost: int = 1) -> None:
        """Count the request now, ``cost`` times; raise RateLimitedError if a bucket refuses
        it (then nothing is charged). Nothing when counted already."""
        if not self.taken:
            self._refuse_if_over(self._take(cost), cost)

    def send(self, conn: psycopg.Connection) -> Pending[None]:
        """Send the count on ``conn`` (last in its pipeline); reading the result raises
        RateLimitedError if a bucket refused the request. Nothing when counted already."""
        if self.taken:
            return Pending(lambda: None)
        self.taken = True
        verdicts = store.pending_take(conn, self._buckets)
        return Pending(lambda: self._refuse_if_over(verdicts.result()))

    def count_after(self) -> None:
        """Count a request whose answer is decided already (it ended before the route sent its
        count): counted, never refused."""
        if not self.taken:
            self._take()

    def _take(self, cost: int = 1) -> list[Verdict]:
        self.taken = True
        if not self._buckets:
            return []
        # One round trip: the statement commits on its own, without BEGIN and COMMIT around it
        # (the pool hands connections out outside a transaction and wants them back that way).
        with get_pool().connection() as conn, autocommit(conn):
            return store.take(conn, self._buckets, cost=cost)

    def _refuse_if_over(self, verdicts: list[Verdict], cost: int = 1) -> None:
        refused = [v for v in verdicts if v.refused]
        if refused:
            worst = max(refused, key=lambda v: v.wait_seconds)
            logger.info(
                "rate limited",
                extra={
                    "limit": worst.bucket.kind.value,
                    "orgId": str(self._caller.org_id),
                    "waitSeconds": round(worst.wait_seconds, 3),
                    "cost": cost,
                },
            )
            raise RateLimitedError(worst, cost)


def quota_of(
    request: Request, caller: Principal, credential_limit: CredentialLimit | None
) -> Quota:
    """The buckets this request counts against."""
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
    return Quota(caller, buckets)


_COUNTED_BY_ROUTE = "__counted_by_route__"

Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def counted_by_route(endpoint: Endpoint) -> Endpoint:
    """Mark a route that counts its request itself, through :func:`route_quota`: with its first
    round trip to the database (``Quota.send``), or once it knows what the request costs
    (``Quota.take(cost=...)``)."""
    setattr(endpoint, _COUNTED_BY_ROUTE, True)
    return endpoint


async def route_quota(request: Request) -> Quota:
    """The request's quota, for a :func:`counted_by_route` route to count (on any other route
    it is counted already and counting it again does nothing)."""
    return request.state.quota


def request_quota(
    credential_limit: CredentialLimit | None = None,
) -> Callable[..., AsyncIterator[None]]:
    """The app-wide dependency counting each request (plus ``credential_limit``, if given)."""

    async def count_request(
        request: Request, caller: Annotated[Principal, Depends(current_principal)]
    ) -> AsyncIterator[None]:
        # Blocking on purpose: a Lambda environment serves one request at a time, and the local
        # runtime gives each request a thread and event loop of its own.
        quota = request.state.quota = quota_of(request, caller, credential_limit)
        if not getattr(request.scope.get("endpoint"), _COUNTED_BY_ROUTE, False):
            quota.take()
            yield
            return
        try:
            yield
        except BaseException as exc:
            # A database that failed the request would only make the count wait for the pool
            # again (a second checkout timeout): such a request goes uncounted.
            if not is_unavailable(exc):
                quota.count_after()
            raise
        quota.count_after()

    return count_request
