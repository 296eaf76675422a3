"""The OpenAI-compatible embeddings client.

``KEYSTONE_CONTEXT_EMBEDDINGS_URL`` is the API base (``http://host:8080/v1``) and requests go to
``{base}/embeddings``. A URL that already ends in ``/embeddings`` is used as it is, for gateways
that publish the full endpoint rather than a base.

Wire format (OpenAI ``POST /v1/embeddings``): ``{"model", "input": [texts], "encoding_format":
"float"}`` plus ``"dimensions"`` when configured; the answer's ``data[].embedding`` are put back in
input order by ``data[].index``, and their count and length are checked.

Every failure is an :class:`EmbeddingsUnavailableError` whose message names an HTTP status or an
exception class, never the URL (it may hold a key in its query string), the API key or input
text. For the same reason urllib3's exception is not chained: its text includes the URL.

The transport is urllib3 (botocore's, so already in every Lambda), not httpx: a query embedding
sits on every hybrid retrieval's critical path, and the same request cost 1.16 ms p50 through
urllib3 against 1.64 through httpx on the local stand-in (docs/decisions.md). Proxies come from
the usual environment variables (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``), as httpx read
them; certificates are checked against the system's trust store.

Source content must reach :meth:`EmbeddingsClient.embed` only through ``context_ledger.dlp.gate``.
"""

from __future__ import annotations

import email.utils
import functools
import json
import math
import random
import re
import time
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import urllib3
from urllib3.exceptions import HTTPError

from context_ledger.aws_secrets import SecretKey
from context_ledger.errors import ServiceUnavailableError
from context_ledger.log import logger
from context_ledger.settings import Settings, get_settings

DEFAULT_BATCH_SIZE = 32  # as KEYSTONE_CONTEXT_EMBEDDINGS_BATCH_SIZE
DEFAULT_TIMEOUT_SECONDS = 30.0  # as KEYSTONE_CONTEXT_EMBEDDINGS_TIMEOUT_SECONDS
DEFAULT_MAX_ATTEMPTS = 3
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 4.0
RETRY_AFTER_CAP_SECONDS = 10.0

# Worth another try, as OpenAI's own SDK judges: timeouts, conflicts, rate limits, every 5xx.
_RETRYABLE_STATUS = frozenset({408, 409, 429})
# An error ``code`` from the endpoint is shown only when it looks like an identifier: some servers
# put the offending input into their error bodies.
_SAFE_CODE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: Connections kept per endpoint: one per thread embedding at once (ingest embeds in parallel).
POOL_SIZE = 8


class EmbeddingsUnavailableError(ServiceUnavailableError):
    """The embeddings endpoint failed or answered something unusable; nothing was embedded."""


def endpoint_url(base: str) -> str:
    """The embeddings endpoint for an API base (``.../v1``) or a full ``.../embeddings`` URL."""
    base = base.rstrip("/")
    return base if base.endswith("/embeddings") else f"{base}/embeddings"


def backoff_seconds(attempt: int) -> float:
    """Capped exponential backoff with equal jitter: at least half the step, at most the step."""
    step = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
    return step / 2 + random.uniform(0, step / 2)  # noqa: S311 (jitter, not a secret)


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` (seconds or HTTP date), capped at RETRY_AFTER_CAP_SECONDS; None if absent."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_SECONDS)


def parse_embeddings(body: Any, *, count: int, dimensions: int | None) -> list[list[float]]:
    """The vectors of an OpenAI embeddings answer, in input order, checked against the request."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise EmbeddingsUnavailableError("embeddings endpoint answered without a data list")
    if len(data) != count:
        raise EmbeddingsUnavailableError(
            f"embeddings endpoint answered {len(data)} embeddings for {count} inputs"
        )
    by_index: dict[int, list[float]] = {}
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if type(index) is not int or not 0 <= index < count or index in by_index:
            raise EmbeddingsUnavailableError("embeddings endpoint answered a bad or repeated index")
        vector = _vector(item.get("embedding"))
        if dimensions is not None and len(vector) != dimensions:
            raise EmbeddingsUnavailableError(
                f"embeddings endpoint answered {len(vector)} dimensions, expected {dimensions}"
            )
        by_index[index] = vector
    return [by_index[i] for i in range(count)]


def _vector(raw: Any) -> list[float]:
    if not isinstance(raw, list) or not raw:
        raise EmbeddingsUnavailableError("embeddings endpoint answered an empty or no embedding")
    if not all(type(x) in (int, float) and math.isfinite(x) for x in raw):
        raise EmbeddingsUnavailableError("embeddings endpoint answered a non-finite or non-number")
    return [float(x) for x in raw]


class EmbeddingsClient:
    """Embeds texts through one OpenAI-compatible endpoint, over one reused HTTP connection pool.

    Inputs go in batches of ``batch_size``; a batch is tried up to ``max_attempts`` times when
    the endpoint is unreachable, times out, or answers 408, 409, 429 or 5xx, waiting
    ``Retry-After`` (capped) or a jittered exponential backoff in between.
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        dimensions: int | None = None,
        api_key: str | Callable[[], str | None] | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if batch_size < 1 or max_attempts < 1:
            raise ValueError("batch_size and max_attempts must be at least 1")
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.timeout = timeout
        self._endpoint = endpoint_url(url)
        self._sleep = sleep
        # A callable key is asked before every request, so a rotated secret is picked up.
        self._api_key = api_key if callable(api_key) else lambda: api_key
        self._http = _pool_manager(self._endpoint)

    def close(self) -> None:
        self._http.clear()

    def embed(self, texts: Sequence[str], *, within: float | None = None) -> list[list[float]]:
        """One vector per text, in order; raises EmbeddingsUnavailableError on any failure.

        ``within`` bounds the whole call (every attempt and the waits between them) to that many
        seconds, for callers a person is waiting on; without it each attempt has the client's
        timeout.
        """
        deadline = None if within is None else time.monotonic() + within
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            vectors.extend(self._embed_batch(batch, deadline))
        if len({len(v) for v in vectors}) > 1:
            raise EmbeddingsUnavailableError("embeddings endpoint answered mixed dimensions")
        return vectors

    def _embed_batch(self, texts: list[str], deadline: float | None) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.dimensions is not None:
            payload["dimensions"] = self.dimensions
        body = self._post(payload, deadline)
        return parse_embeddings(body, count=len(texts), dimensions=self.dimensions)

    def _headers(self) -> dict[str, str]:
        try:
            key = self._api_key()
        except Exception as exc:  # boto3 raises several unrelated exception families
            raise EmbeddingsUnavailableError(
                f"embeddings API key could not be read ({type(exc).__name__})"
            ) from None
        headers = dict(_HEADERS)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _post(self, payload: dict[str, Any], deadline: float | None) -> Any:
        problem = "out of time"
        headers = self._headers()
        body = json.dumps(payload).encode()
        tried = 0
        while tried < self.max_attempts:
            timeout = self._attempt_timeout(deadline)
            if timeout is None:
                break
            tried += 1
            try:
                # Redirects are not followed: a redirect could carry source text to another host.
                response = self._http.urlopen(
                    "POST",
                    self._endpoint,
                    body=body,
                    headers=headers,
                    timeout=timeout,
                    retries=False,
                    redirect=False,
                )
            except HTTPError as exc:
                problem = f"unreachable ({type(exc).__name__})"
                delay = backoff_seconds(tried)
            else:
                if 200 <= response.status < 300:
                    return _json(response)
                problem = f"answered HTTP {response.status}{_error_code(response)}"
                if response.status not in _RETRYABLE_STATUS and response.status < 500:
                    raise EmbeddingsUnavailableError(f"embeddings endpoint {problem}")
                delay = retry_after_seconds(response.headers.get("Retry-After"))
                if delay is None:
                    delay = backoff_seconds(tried)
            if tried == self.max_attempts:
                break
            if deadline is not None and time.monotonic() + delay >= deadline:
                break  # no time left for another attempt
            logger.warning(
                "embeddings request failed; retrying",
                extra={"problem": problem, "attempt": tried, "delay_s": round(delay, 3)},
            )
            self._sleep(delay)
        raise EmbeddingsUnavailableError(f"embeddings endpoint {problem} after {tried} attempts")

    def _attempt_timeout(self, deadline: float | None) -> urllib3.Timeout | None:
        """The next attempt's timeout (to connect, and for each read): the client's, shortened to
        what is left before the deadline; None when nothing is left."""
        seconds = self.timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            seconds = min(left, seconds)
        return urllib3.Timeout(connect=seconds, read=seconds)


_HEADERS = {
    "Accept": "application/json",
    "Content-Type": "application/json",
    "User-Agent": "context-ledger",
}


def _pool_manager(endpoint: str) -> urllib3.PoolManager:
    """Kept-alive connections to ``endpoint``, through the proxy the environment names for it."""
    url = urllib3.util.parse_url(endpoint)
    proxy = urllib.request.getproxies().get(url.scheme or "")
    if proxy and not urllib.request.proxy_bypass(url.host or ""):
        return urllib3.ProxyManager(proxy, num_pools=1, maxsize=POOL_SIZE)
    return urllib3.PoolManager(num_pools=1, maxsize=POOL_SIZE)


def _json(response: urllib3.BaseHTTPResponse) -> Any:
    try:
        return json.loads(response.data)
    except ValueError:
        raise EmbeddingsUnavailableError("embeddings endpoint answered invalid JSON") from None


def _error_code(response: urllib3.BaseHTTPResponse) -> str:
    """`` (code)`` from an OpenAI error body when it is a plain identifier, else nothing."""
    try:
        error = json.loads(response.data).get("error")
        code = error.get("code") or error.get("type")
    except (ValueError, AttributeError):
        return ""
    return f" ({code})" if isinstance(code, str) and _SAFE_CODE.match(code) else ""


def client_from_settings(settings: Settings) -> EmbeddingsClient | None:
    """The configured client, or None when no embeddings endpoint is configured."""
    if not settings.embeddings_url or not settings.embeddings_model:  # settings ensure both or none
        return None
    return _client(
        settings.embeddings_url,
        settings.embeddings_model,
        settings.embeddings_dimensions,
        settings.embeddings_api_key,
        settings.embeddings_api_key_secret_arn,
        settings.embeddings_batch_size,
        settings.embeddings_timeout_seconds,
    )


@functools.lru_cache(maxsize=4)
def _client(
    url: str,
    model: str,
    dimensions: int | None,
    api_key: str | None,
    api_key_arn: str | None,
    batch_size: int,
    timeout: float,
) -> EmbeddingsClient:
    """One client per configuration, reused (a warm Lambda keeps its connections); keyed on the
    configuration so that a process whose settings change (tests, the local runtime) never gets
    a client of the old one."""
    return EmbeddingsClient(
        url,
        model,
        dimensions=dimensions,
        api_key=SecretKey(api_key, api_key_arn),
        batch_size=batch_size,
        timeout=timeout,
    )


def get_embeddings_client() -> EmbeddingsClient | None:
    """The process-wide client for the current settings, or None."""
    return client_from_settings(get_settings())
