"""The upstream model provider: any OpenAI-compatible server (OpenAI, vLLM, Ollama, a Bedrock
access gateway) at ``KEYSTONE_MODELS_PROVIDER_URL``, the API base (``https://host/v1``).

Requests are built here from the caller's body bytes and the gateway's own headers only
(content type, accept, the provider key): no header of the caller, so neither its token nor any
``X-Keystone-*`` header, can reach the provider. ``Accept-Encoding: identity`` keeps the answer's
bytes exactly as the provider wrote them, so they pass through unchanged.

Failures to reach the provider are :class:`ProviderUnavailableError` (503); their messages name
an exception class, never the URL or key. An answer the provider gave, error or not, is the
caller's answer and is passed through as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

import httpx

from context_ledger.aws_secrets import SecretKey
from context_ledger.errors import ServiceUnavailableError
from context_ledger.settings import get_settings

#: API Gateway gives up on an integration after 30 s; a provider slower than this between two
#: bytes of its answer is treated as down.
READ_TIMEOUT_SECONDS = 28.0
CONNECT_TIMEOUT_SECONDS = 5.0

#: Provider response headers the caller gets back; everything else stays behind the gateway.
_PASSED_HEADERS = frozenset({"content-type", "retry-after"})
_PASSED_PREFIXES = ("x-ratelimit-",)


class ProviderUnavailableError(ServiceUnavailableError):
    """The model provider is not configured, unreachable, or timed out; the call can be retried."""


class Endpoint(StrEnum):
    """The OpenAI endpoints the gateway serves; the value is what model logs record."""

    CHAT_COMPLETIONS = "chat.completions"
    EMBEDDINGS = "embeddings"

    @property
    def path(self) -> str:
        return "/chat/completions" if self is Endpoint.CHAT_COMPLETIONS else "/embeddings"


@dataclass
class ProviderAnswer:
    """The provider's answer, body not yet read (a stream is passed on as it arrives)."""

    response: httpx.Response

    @property
    def status(self) -> int:
        return self.response.status_code

    @property
    def is_event_stream(self) -> bool:
        content_type = self.response.headers.get("content-type", "")
        return self.response.is_success and content_type.startswith("text/event-stream")

    def passed_headers(self) -> dict[str, str]:
        return {
            name: value
            for name, value in self.response.headers.items()
            if name in _PASSED_HEADERS or name.startswith(_PASSED_PREFIXES)
        }

    def read(self) -> bytes:
        """The whole body, exactly as sent."""
        try:
            return self.response.read()
        except httpx.HTTPError as exc:
            raise ProviderUnavailableError(
                f"the model provider broke off its answer ({type(exc).__name__})"
            ) from None
        finally:
            self.response.close()

    def iter_bytes(self) -> Iterator[bytes]:
        """The body's bytes as they arrive; raises httpx errors if the provider breaks off."""
        try:
            yield from self.response.iter_bytes()
        finally:
            self.response.close()


class ProviderClient:
    """One reused connection pool to the provider (a warm Lambda keeps its connections).

    ``api_key`` is the key, or a callable returning it per request (a
    :class:`~context_ledger.aws_secrets.SecretKey`, so a rotated secret is picked up).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | Callable[[], str | None] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._api_key = api_key if callable(api_key) else lambda: api_key
        headers = {
            "Accept": "application/json, text/event-stream",
            "Accept-Encoding": "identity",
            "User-Agent": "context-ledger-gateway",
        }
        timeout = httpx.Timeout(READ_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS)
        # Redirects are not followed: one could carry the prompt and the key to another host.
        self._http = httpx.Client(
            headers=headers, timeout=timeout, transport=transport, follow_redirects=False
        )

    def close(self) -> None:
        self._http.close()

    def open(self, endpoint: Endpoint, body: bytes) -> ProviderAnswer:
        """Send the caller's body bytes; the answer's headers are in, its body is not read."""
        headers = {"Content-Type": "application/json"}
        try:
            key = self._api_key()
        except Exception as exc:  # boto3 raises several unrelated exception families
            raise ProviderUnavailableError(
                f"the model provider key could not be read ({type(exc).__name__})"
            ) from None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = self._http.build_request(
            "POST", self._base + endpoint.path, content=body, headers=headers
        )
        try:
            return ProviderAnswer(self._http.send(request, stream=True))
        except httpx.HTTPError as exc:
            # Not chained: the httpx exception's text includes the URL.
            raise ProviderUnavailableError(
                f"the model provider is unreachable ({type(exc).__name__})"
            ) from None


@functools.lru_cache(maxsize=4)
def _client(base_url: str, api_key: str | None, key_secret_arn: str | None) -> ProviderClient:
    return ProviderClient(base_url, api_key=SecretKey(api_key, key_secret_arn))


def get_provider() -> ProviderClient:
    """The process-wide client for the configured provider, or 503 when none is configured.

    The key is ``KEYSTONE_MODELS_PROVIDER_API_KEY``, else the string of the Secrets Manager
    secret ``KEYSTONE_MODELS_PROVIDER_KEY_SECRET_ARN`` (re-read as it ages), else none.
    """
    settings = get_settings()
    if not settings.models_provider_url:
        raise ProviderUnavailableError("the model gateway has no provider configured")
    return _client(
        settings.models_provider_url,
        settings.models_provider_api_key,
        settings.models_provider_key_secret_arn,
    )
