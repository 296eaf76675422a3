"""The gateway's request headers (spec: "Joining a model call to its retrieval").

``X-Keystone-Context-Request-Id`` names the retrieval a model call used: a ``requestId`` or an
``attributionId``, 1 to 128 characters of ``A-Z a-z 0-9 . _ : -`` starting with a letter or digit.

``X-Keystone-Metadata`` is a JSON object (UTF-8, at most 4096 bytes). Its ``context_request_id``
key, when present, is a string under the same rule and names the same retrieval; if both carry an
id they must be equal. Other keys are ignored (kept for future use) and never forwarded.

``X-Keystone-Client: name/version`` is recorded only; a malformed value is dropped.

Every violation is ``400 invalid_request`` and is raised before the provider is contacted. The
headers are read here and nowhere else; the provider client never copies the caller's headers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from context_ledger.attribution.lookup import REQUEST_ID
from context_ledger.attribution.publisher import parse_client_header
from context_ledger.errors import InvalidRequestError

CONTEXT_REQUEST_ID = "x-keystone-context-request-id"
METADATA = "x-keystone-metadata"
CLIENT = "x-keystone-client"
#: Response headers.
GATEWAY_REQUEST_ID = "X-Keystone-Gateway-Request-Id"
CONTEXT_LINK = "X-Keystone-Context-Link"

METADATA_MAX_BYTES = 4096
METADATA_CONTEXT_KEY = "context_request_id"

_ID_RULE = "1 to 128 characters of A-Z a-z 0-9 . _ : - starting with a letter or digit"


@dataclass(frozen=True)
class GatewayHeaders:
    """What the caller declared: the retrieval it used, and its app."""

    context_request_id: str | None
    client_name: str | None = None
    client_version: str | None = None


def _single(values: Sequence[str], name: str) -> str | None:
    """A header's one value; a header sent twice with different values is ambiguous."""
    distinct = set(values)
    if len(distinct) > 1:
        raise InvalidRequestError(f"{name} is given more than once with different values")
    return next(iter(distinct), None)


def _checked_id(value: str, where: str) -> str:
    if not REQUEST_ID.fullmatch(value):
        raise InvalidRequestError(f"{where} must be {_ID_RULE}")
    return value


def _metadata_id(raw: str) -> str | None:
    if len(raw.encode()) > METADATA_MAX_BYTES:
        raise InvalidRequestError(f"X-Keystone-Metadata is over {METADATA_MAX_BYTES} bytes")
    try:
        metadata = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
        raise InvalidRequestError("X-Keystone-Metadata must be a JSON object") from None
    if not isinstance(metadata, dict):
        raise InvalidRequestError("X-Keystone-Metadata must be a JSON object")
    if METADATA_CONTEXT_KEY not in metadata:
        return None
    value = metadata[METADATA_CONTEXT_KEY]
    if not isinstance(value, str):
        raise InvalidRequestError(f"X-Keystone-Metadata {METADATA_CONTEXT_KEY} must be a string")
    return _checked_id(value, f"X-Keystone-Metadata {METADATA_CONTEXT_KEY}")


def parse_gateway_headers(headers: dict[str, list[str]]) -> GatewayHeaders:
    """Check the ``X-Keystone-*`` headers (lower-case names → values) or raise 400."""
    header_id = _single(headers.get(CONTEXT_REQUEST_ID, []), "X-Keystone-Context-Request-Id")
    if header_id is not None:
        header_id = _checked_id(header_id, "X-Keystone-Context-Request-Id")
    metadata = _single(headers.get(METADATA, []), "X-Keystone-Metadata")
    metadata_id = None if metadata is None else _metadata_id(metadata)
    if header_id is not None and metadata_id is not None and header_id != metadata_id:
        raise InvalidRequestError(
            "X-Keystone-Context-Request-Id and X-Keystone-Metadata context_request_id differ"
        )
    clients = set(headers.get(CLIENT, []))
    # Declared, never trusted: a malformed or repeated client header is dropped, not refused.
    client = parse_client_header(clients.pop()) if len(clients) == 1 else None
    return GatewayHeaders(
        context_request_id=header_id or metadata_id,
        client_name=client[0] if client else None,
        client_version=client[1] if client else None,
    )
