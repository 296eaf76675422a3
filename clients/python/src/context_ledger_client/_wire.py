"""What the sync and async clients share: a call described as data, the retry rule, and turning
an answer into a result or an error. The two clients differ only in how they send a call and
how they sleep (``client.py``); everything that decides is here, once.

Every call runs as a *flow*: a generator that yields a :class:`Call` to be sent once (and is
given back the ``httpx.Response``) or a :class:`Sleep`, and returns the result. :func:`perform`
is the flow of one call with its retries; a call with several steps (indexing a folder, waiting
for an attribution) composes them with ``yield from``. A client only runs flows: it sends, it
sleeps, and nothing it does decides anything, so the sync and async clients cannot drift.
"""

from __future__ import annotations

import email.utils
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import httpx

from context_ledger_client.errors import ContextLedgerError, error_for

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer.

    ``idempotent`` says whether sending it twice is safe, so a 503 may be retried (see
    :class:`RetryPolicy`).
    """

    method: str
    path: str
    parse: Callable[[Any], T]
    json: Any = None
    params: Mapping[str, Any] | None = None
    idempotent: bool = False


@dataclass(frozen=True)
class Sleep:
    """A pause inside a multi-step flow (waiting for the asynchronous attribution writer)."""

    seconds: float


Step = Call[Any] | Sleep
Flow = Generator[Step, Any, T]


def perform(call: Call[T], retry: RetryPolicy) -> Flow[T]:
    """Send ``call``, again as ``retry`` allows, and read the final answer."""
    attempt, waited = 0, 0.0
    while True:
        attempt += 1
        response = yield call
        wait = retry.delay(call, response, attempt, waited)
        if wait < 0:
            return read(call, response)
        yield Sleep(wait)
        waited += wait


def no_content(_: Any) -> None:
    """The parser of calls answered with 204."""


@dataclass(frozen=True)
class RetryPolicy:
    """When a refused call is sent again.

    - **429** (rate limited) is retried for every call: the service refuses it before doing
      anything, and charges it to no limit, so sending it again is safe whatever it does.
    - **503** is retried for idempotent calls only (reads, retrieve, link, grant, a document batch
      of an open build): a 503 can come after a write happened (an index build created, a memory
      stored), and sending those again would do them twice.
    - The wait is the answer's ``Retry-After`` (seconds or an HTTP date); without one (API
      Gateway's own 429), ``backoff`` doubled each time.
    - At most ``max_attempts`` sends in all and ``max_wait`` seconds of waiting in all: a
      ``Retry-After`` beyond what is left is not waited for, and the error goes to the caller
      (:class:`RateLimitedError` carries ``retry_after``).
    """

    max_attempts: int = 4
    max_wait: float = 30.0
    backoff: float = 0.5

    def delay(
        self, call: Call[Any], response: httpx.Response, attempt: int, waited: float
    ) -> float:
        """Seconds to wait before sending ``call`` again, or -1 not to."""
        status = response.status_code
        if attempt >= self.max_attempts:
            return -1
        if not (status == 429 or (status == 503 and call.idempotent)):
            return -1
        advised = retry_after(response)
        wait = advised if advised is not None else self.backoff * 2 ** (attempt - 1)
        return wait if waited + wait <= self.max_wait else -1


def retry_after(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (delta-seconds or an HTTP date), None if absent."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def read(call: Call[T], response: httpx.Response) -> T:
    """The call's result, or the :class:`ContextLedgerError` its answer stands for."""
    if response.is_success:
        return call.parse(response.json() if response.content else None)
    raise _error(response)


def _error(response: httpx.Response) -> ContextLedgerError:
    try:
        body = response.json()
    except ValueError:
        body = None
    return error_for(
        response.status_code,
        body,
        fallback_text=response.text or response.reason_phrase,
        retry_after=retry_after(response),
    )


def request_of(client: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    return client.build_request(call.method, call.path, json=call.json, params=call.params)


def drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    """Only the fields the caller gave: the API applies its own defaults to the rest."""
    return {k: v for k, v in values.items() if v is not None}
