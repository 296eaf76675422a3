"""One model call through the gateway: forward, pass the answer through, link, log.

The provider's answer reaches the caller byte for byte, streamed or not, error or not; the gateway
only adds headers: ``X-Keystone-Gateway-Request-Id`` always, and ``X-Keystone-Context-Link`` on
every provider answer to a call that named a retrieval. A plain answer is linked once its body is
in; a streamed one (``text/event-stream``) as it starts, before any of its body is relayed, because
headers leave first (HTTP trailers survive neither API Gateway nor Lambda).

An error answer (not 2xx) is linked too: the call carried the retrieval's context to the
provider whatever it answered, and the evidence says so; the model log tells its status. Without
a provider answer (unreachable, broken off) there is nothing to link. Logging and linking never
fail or alter the call; their failures are logged.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx

from context_ledger.auth.principal import Principal
from context_ledger.errors import InvalidRequestError
from context_ledger.evidence.keys import KeyRing, get_key_ring
from context_ledger.log import logger
from context_ledger.model_gateway.calls import ModelCall, record_call
from context_ledger.model_gateway.headers import CONTEXT_LINK, GATEWAY_REQUEST_ID, GatewayHeaders
from context_ledger.model_gateway.linking import (
    Connect,
    LinkResult,
    link_retrieval,
    pooled_connection,
)
from context_ledger.model_gateway.provider import (
    Endpoint,
    ProviderAnswer,
    ProviderClient,
    ProviderUnavailableError,
)
from context_ledger.model_gateway.usage import StreamUsage, TokenUsage, usage_of_body


@dataclass(frozen=True)
class CallRequest:
    """A checked call: who calls, which endpoint, the body bytes to forward, the headers."""

    principal: Principal
    endpoint: Endpoint
    body: bytes
    headers: GatewayHeaders
    model: str | None = None
    stream: bool = False

    @classmethod
    def of(
        cls, principal: Principal, endpoint: Endpoint, body: bytes, headers: GatewayHeaders
    ) -> CallRequest:
        """Read ``model`` and ``stream`` for the log; the body must be a JSON object (else 400).

        The body itself is forwarded as received, not re-serialised.
        """
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            raise InvalidRequestError("request body is not valid JSON") from None
        if not isinstance(document, dict):
            raise InvalidRequestError("request body must be a JSON object")
        model = document.get("model")
        return cls(
            principal=principal,
            endpoint=endpoint,
            body=body,
            headers=headers,
            model=model if isinstance(model, str) else None,
            stream=document.get("stream") is True,
        )


@dataclass(frozen=True)
class PlainAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class StreamedAnswer:
    status: int
    headers: dict[str, str]
    chunks: Iterator[bytes] = field(repr=False)


@dataclass
class GatewayService:
    provider: ProviderClient
    wait_ms: int
    connect: Connect = pooled_connection
    keys: Callable[[], KeyRing] = get_key_ring
    clock: Callable[[], float] = time.monotonic

    def call(self, request: CallRequest) -> PlainAnswer | StreamedAnswer:
        gateway_request_id = uuid.uuid4()
        started = self.clock()
        headers = {GATEWAY_REQUEST_ID: str(gateway_request_id)}
        try:
            answer = self.provider.open(request.endpoint, request.body)
            if answer.is_event_stream:
                link = self._link(request, gateway_request_id, headers)
                chunks = self._stream(request, answer, gateway_request_id, started, link)
                return StreamedAnswer(answer.status, {**answer.passed_headers(), **headers}, chunks)
            body = answer.read()
        except ProviderUnavailableError as exc:
            logger.warning("model provider unavailable", extra={"problem": exc.message})
            self._record(request, gateway_request_id, started, exc.status, None, None)
            body = json.dumps(exc.body()).encode()
            headers["Content-Type"] = "application/json"
            return PlainAnswer(exc.status, headers, body)
        link = self._link(request, gateway_request_id, headers)
        self._record(request, gateway_request_id, started, answer.status, usage_of_body(body), link)
        return PlainAnswer(answer.status, {**answer.passed_headers(), **headers}, body)

    def _stream(
        self,
        request: CallRequest,
        answer: ProviderAnswer,
        gateway_request_id: uuid.UUID,
        started: float,
        link: LinkResult | None,
    ) -> Iterator[bytes]:
        usage = StreamUsage()
        try:
            for chunk in answer.iter_bytes():
                usage.feed(chunk)
                yield chunk
        except httpx.HTTPError as exc:
            # Half an answer is all the caller gets; its link stays, as the answer had started.
            logger.warning("model provider broke off a stream", extra={"problem": repr(exc)})
        finally:
            self._record(request, gateway_request_id, started, answer.status, usage.usage, link)

    def _link(
        self, request: CallRequest, gateway_request_id: uuid.UUID, headers: dict[str, str]
    ) -> LinkResult | None:
        """Link the named retrieval (if any) to this call and put the outcome in ``headers``."""
        if not request.headers.context_request_id:
            return None
        link = link_retrieval(
            request.principal,
            context_request_id=request.headers.context_request_id,
            response_id=str(gateway_request_id),
            wait_ms=self.wait_ms,
            connect=self.connect,
            keys=self.keys,
            clock=self.clock,
        )
        headers[CONTEXT_LINK] = link.outcome.value
        return link

    def _record(
        self,
        request: CallRequest,
        gateway_request_id: uuid.UUID,
        started: float,
        status: int,
        usage: TokenUsage | None,
        link: LinkResult | None,
    ) -> None:
        principal = request.principal
        call = ModelCall(
            gateway_request_id=gateway_request_id,
            org_id=principal.org_id,
            user_id=principal.user_id,
            client_id=principal.client_id,
            client_name=request.headers.client_name,
            client_version=request.headers.client_version,
            endpoint=request.endpoint,
            model=request.model,
            stream=request.stream,
            status=status,
            latency_ms=round((self.clock() - started) * 1000),
            usage=usage,
            context_request_id=request.headers.context_request_id,
            link_outcome=None if link is None else link.outcome,
            link_latency_ms=None if link is None else link.latency_ms,
        )
        try:
            with self.connect() as conn:
                record_call(conn, call)
        except Exception as exc:  # the call was answered; a lost log line must not undo that
            logger.error(
                "model call not logged",
                extra={"gatewayRequestId": str(gateway_request_id), "problem": type(exc).__name__},
            )
