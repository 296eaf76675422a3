"""Publish a retrieval's attribution event to SQS, before the answer leaves (spec, "Attribution").

If the event cannot be queued the retrieval answers ``503 context.attribution.failed`` and delivers
nothing: no context without evidence.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from context_ledger.dlp.texts import holds_credential
from context_ledger.errors import ServiceUnavailableError
from context_ledger.log import logger
from context_ledger.settings import get_settings

_CLIENT_HEADER = re.compile(
    r"^([A-Za-z0-9][A-Za-z0-9._-]{0,63})/([A-Za-z0-9][A-Za-z0-9._+-]{0,63})$"
)


class AttributionFailedError(ServiceUnavailableError):
    """The attribution event could not be queued, so nothing is delivered."""

    code = "context.attribution.failed"

    def __init__(self) -> None:
        super().__init__("the retrieval could not be recorded; nothing was delivered, retry")


def parse_client_header(value: str | None) -> tuple[str, str] | None:
    """``X-Keystone-Client: name/version`` as (name, version); a malformed header is dropped,
    and so is one holding a credential (a key pasted into the app's name): the evidence chain
    would keep it for good."""
    if not value:
        return None
    match = _CLIENT_HEADER.fullmatch(value.strip())
    if match is None or holds_credential(match[0], random=False):
        return None
    return match[1], match[2]


#: The caller is waiting: a queue that does not answer fails the request (503) instead of hanging
#: it on boto3's defaults (60 s to connect, 60 s to read, retried). Worst case about
#: 2 x (2 + 3) s plus one backoff; an endpoint that refuses connections fails in milliseconds.
CONNECT_TIMEOUT_SECONDS = 2
READ_TIMEOUT_SECONDS = 3
MAX_ATTEMPTS = 2


@functools.cache
def _sqs() -> Any:
    config = Config(
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        # total: the first try included (botocore's "max_attempts" counts retries only)
        retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
    )
    return boto3.client("sqs", config=config)


def publish_attribution(event: dict[str, Any]) -> None:
    """Queue the event or raise AttributionFailedError."""
    queue_url = get_settings().attribution_queue_url
    if not queue_url:
        logger.error("KEYSTONE_ATTRIBUTION_QUEUE_URL is not set: refusing to deliver context")
        raise AttributionFailedError()
    try:
        _sqs().send_message(
            QueueUrl=queue_url, MessageBody=json.dumps(event, separators=(",", ":"))
        )
    except (BotoCoreError, ClientError) as exc:
        logger.error("attribution event not queued", extra={"error": type(exc).__name__})
        raise AttributionFailedError() from None
