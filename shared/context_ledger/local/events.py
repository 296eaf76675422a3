"""The events AWS sends to functions, and how API Gateway maps a function's answer back to HTTP.

Shapes follow what the services send, field for field:

- HTTP API payload format 2.0 (``http_event``) and its Lambda authorizer REQUEST event
  (``authorizer_event``). As HTTP APIs do, ``rawPath`` and path parameters are percent-decoded, the
  query string stays raw in ``rawQueryString`` and is decoded in ``queryStringParameters`` (``+``
  is kept, not turned into a space), repeated headers and parameters are joined with commas, and
  the ``cookie`` header moves to ``cookies``. API Gateway's own headers are added
  (``x-forwarded-for``/``-port``/``-proto``, ``x-amzn-trace-id``).
- The Lambda proxy result of payload 2.0 (``http_response``): a dict with ``statusCode`` is mapped
  field by field; any other value is sent as a ``200`` JSON body, as API Gateway infers it.
- SQS batches (``sqs_record``) and EventBridge scheduled events (``scheduled_event``).
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlsplit

#: The account id every local ARN uses (moto's default account, so queue ARNs agree).
ACCOUNT_ID = "123456789012"
STAGE = "$default"
#: System attributes Lambda copies from an SQS message into the record it delivers.
_SQS_RECORD_ATTRIBUTES = (
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
    "SequenceNumber",
    "MessageGroupId",
    "MessageDeduplicationId",
    "AWSTraceHeader",
)

#: Connection-level headers end at the gateway; the function never sees them.
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "te", "transfer-encoding", "upgrade"})


class InvalidResponseError(ValueError):
    """A function returned something API Gateway would answer with a 500."""


@dataclass(frozen=True)
class HttpRequest:
    """An HTTP request as it reached the gateway; ``target`` is the request line's path+query."""

    method: str
    target: str
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""
    source_ip: str = "127.0.0.1"
    server_port: int = 443
    scheme: str = "https"
    protocol: str = "HTTP/1.1"

    @property
    def path(self) -> str:
        """The path still percent-encoded (``/a%20b``), for splitting into segments."""
        return _split_target(self.target)[0]

    @property
    def query(self) -> str:
        return _split_target(self.target)[1]

    def header(self, name: str) -> str | None:
        """A header's value, repeated headers joined with commas as API Gateway does."""
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return ",".join(values) if values else None


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


@dataclass(frozen=True)
class ApiInfo:
    """What identifies the HTTP API in every event it sends."""

    api_id: str
    region: str
    account_id: str = ACCOUNT_ID


@dataclass(frozen=True)
class Stamp:
    """The values API Gateway makes up for each request."""

    request_id: str
    epoch_ms: int
    trace_id: str

    @classmethod
    def new(cls) -> Stamp:
        epoch_ms = int(time.time() * 1000)
        return cls(
            # API Gateway's request ids look like "Wr1GFhQJoAMEbSg=": base64 of 10 random bytes.
            request_id=base64.b64encode(secrets.token_bytes(10)).decode(),
            epoch_ms=epoch_ms,
            trace_id=f"Root=1-{epoch_ms // 1000:08x}-{secrets.token_hex(12)}",
        )


def http_event(
    request: HttpRequest,
    *,
    route_key: str,
    path_parameters: Mapping[str, str],
    api: ApiInfo,
    stamp: Stamp,
    authorizer_context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The HTTP API payload 2.0 event for a request matched to ``route_key``."""
    parts = _request_parts(request, route_key, path_parameters, api, stamp)
    context = parts["requestContext"]
    if authorizer_context is not None:
        context = {**context, "authorizer": {"lambda": dict(authorizer_context)}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": parts["rawPath"],
        "rawQueryString": parts["rawQueryString"],
    }
    event.update(_optional(parts, "cookies"))
    event["headers"] = parts["headers"]
    event.update(_optional(parts, "queryStringParameters"))
    event["requestContext"] = context
    is_base64 = False
    if request.body:
        try:
            event["body"] = request.body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(request.body).decode()
            is_base64 = True
    event.update(_optional(parts, "pathParameters"))
    event["isBase64Encoded"] = is_base64
    return event


def authorizer_event(
    request: HttpRequest,
    *,
    route_key: str,
    path_parameters: Mapping[str, str],
    identity_source: Sequence[str],
    api: ApiInfo,
    stamp: Stamp,
) -> dict[str, Any]:
    """The Lambda authorizer REQUEST event (payload 2.0) for a request to ``route_key``."""
    parts = _request_parts(request, route_key, path_parameters, api, stamp)
    route_arn = (
        f"arn:aws:execute-api:{api.region}:{api.account_id}:{api.api_id}"
        f"/{STAGE}/{request.method.upper()}{parts['rawPath']}"
    )
    event: dict[str, Any] = {
        "version": "2.0",
        "type": "REQUEST",
        "routeArn": route_arn,
        "identitySource": list(identity_source),
        "routeKey": route_key,
        "rawPath": parts["rawPath"],
        "rawQueryString": parts["rawQueryString"],
    }
    event.update(_optional(parts, "cookies"))
    event["headers"] = parts["headers"]
    event.update(_optional(parts, "queryStringParameters"))
    event["requestContext"] = parts["requestContext"]
    event.update(_optional(parts, "pathParameters"))
    return event


def _event_headers(request: HttpRequest) -> dict[str, str]:
    """Request headers as the function sees them: lower-case, joined, plus API Gateway's own."""
    headers: dict[str, str] = {}
    for name, value in request.headers:
        key = name.lower()
        if key in _HOP_BY_HOP:
            continue
        headers[key] = f"{headers[key]},{value}" if key in headers else value
    headers.pop("cookie", None)
    forwarded = headers.get("x-forwarded-for")
    headers["x-forwarded-for"] = (
        f"{forwarded}, {request.source_ip}" if forwarded else request.source_ip
    )
    headers["x-forwarded-port"] = str(request.server_port)
    headers["x-forwarded-proto"] = request.scheme
    return headers


def http_response(result: Any) -> HttpResponse:
    """Map a function's payload 2.0 result to HTTP; raises InvalidResponseError like a 500."""
    if not (isinstance(result, dict) and "statusCode" in result):
        body = json.dumps(result).encode()
        return HttpResponse(200, [("content-type", "application/json")], body)
    try:
        status = int(result["statusCode"])
    except (TypeError, ValueError):
        raise InvalidResponseError(f"statusCode {result['statusCode']!r} is not a number") from None
    if not 100 <= status <= 599:
        raise InvalidResponseError(f"statusCode {status} is out of range")
    headers: list[tuple[str, str]] = []
    for name, value in (result.get("headers") or {}).items():
        headers.append((str(name), _header_value(value)))
    for name, values in (result.get("multiValueHeaders") or {}).items():
        headers.extend((str(name), _header_value(value)) for value in values)
    headers.extend(("set-cookie", str(cookie)) for cookie in result.get("cookies") or ())
    body = result.get("body")
    if body is None:
        return HttpResponse(status, headers)
    if not isinstance(body, str):
        raise InvalidResponseError("body must be a string")
    if result.get("isBase64Encoded"):
        try:
            return HttpResponse(status, headers, base64.b64decode(body, validate=True))
        except binascii.Error:
            raise InvalidResponseError("body is not valid base64") from None
    return HttpResponse(status, headers, body.encode("utf-8"))


def gateway_error(status: int, message: str) -> HttpResponse:
    """An answer API Gateway gives itself (404, 401, 403, 413, 500): ``{"message": ...}``."""
    body = json.dumps({"message": message}, separators=(",", ":")).encode()
    return HttpResponse(status, [("content-type", "application/json")], body)


def sqs_record(message: Mapping[str, Any], *, queue_arn: str, region: str) -> dict[str, Any]:
    """One record of the SQS event Lambda delivers, from a ReceiveMessage result."""
    attributes = message.get("Attributes") or {}
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {k: attributes[k] for k in _SQS_RECORD_ATTRIBUTES if k in attributes},
        "messageAttributes": {
            name: _message_attribute(value)
            for name, value in (message.get("MessageAttributes") or {}).items()
        },
        "md5OfBody": message["MD5OfBody"],
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    record.update(eventSource="aws:sqs", eventSourceARN=queue_arn, awsRegion=region)
    return record


def scheduled_event(
    *,
    rule_arn: str,
    region: str,
    now: datetime | None = None,
    event_id: str | None = None,
    account_id: str = ACCOUNT_ID,
) -> dict[str, Any]:
    """The EventBridge "Scheduled Event" a schedule delivers."""
    now = now or datetime.now(UTC)
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": account_id,
        "time": now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [rule_arn],
        "detail": {},
    }


def _split_target(target: str) -> tuple[str, str]:
    """Path and query of a request target; the absolute form (``http://host/p?q``) is allowed."""
    if "://" in target.split("?", 1)[0]:
        parts = urlsplit(target)
        return parts.path or "/", parts.query
    path, _, query = target.partition("?")
    return path or "/", query


def _request_parts(
    request: HttpRequest,
    route_key: str,
    path_parameters: Mapping[str, str],
    api: ApiInfo,
    stamp: Stamp,
) -> dict[str, Any]:
    """The fields the route event and the authorizer event share."""
    raw_path = unquote(request.path)
    headers = _event_headers(request)
    headers.setdefault("x-amzn-trace-id", stamp.trace_id)
    domain = (request.header("host") or "localhost").rsplit(":", 1)[0]
    moment = datetime.fromtimestamp(stamp.epoch_ms / 1000, UTC)
    parts: dict[str, Any] = {
        "rawPath": raw_path,
        "rawQueryString": request.query,
        "headers": headers,
        "requestContext": {
            "accountId": api.account_id,
            "apiId": api.api_id,
            "domainName": domain,
            "domainPrefix": domain.split(".", 1)[0],
            "http": {
                "method": request.method.upper(),
                "path": raw_path,
                "protocol": request.protocol,
                "sourceIp": request.source_ip,
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": stamp.request_id,
            "routeKey": route_key,
            "stage": STAGE,
            "time": moment.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": stamp.epoch_ms,
        },
    }
    cookies = [
        cookie.strip()
        for name, value in request.headers
        if name.lower() == "cookie"
        for cookie in value.split(";")
        if cookie.strip()
    ]
    if cookies:
        parts["cookies"] = cookies
    query = query_parameters(request.query)
    if query:
        parts["queryStringParameters"] = query
    if path_parameters:
        parts["pathParameters"] = dict(path_parameters)
    return parts


def query_parameters(raw: str) -> dict[str, str]:
    """Decoded query parameters; a repeated name gets its values joined with commas."""
    parameters: dict[str, str] = {}
    for item in filter(None, raw.split("&")):
        name, _, value = item.partition("=")
        name, value = unquote(name), unquote(value)
        parameters[name] = f"{parameters[name]},{value}" if name in parameters else value
    return parameters


def _optional(parts: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {key: parts[key]} if key in parts else {}


def _header_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _message_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    attribute: dict[str, Any] = {}
    if "StringValue" in value:
        attribute["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        attribute["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode()
    attribute["stringListValues"] = list(value.get("StringListValues") or [])
    attribute["binaryListValues"] = [
        base64.b64encode(item).decode() for item in value.get("BinaryListValues") or []
    ]
    attribute["dataType"] = value["DataType"]
    return attribute
