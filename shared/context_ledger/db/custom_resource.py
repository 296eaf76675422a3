"""The ``DatabaseMigrations`` custom resource: apply the SQL migrations during every deploy.

CloudFormation calls :func:`handler` (``MigrateFunction``) on Create, Update and Delete and then
waits for an answer PUT to the pre-signed ``ResponseURL``. A handler that dies without answering
leaves the stack waiting until the resource's ``ServiceTimeout``, so every path answers: success,
any exception, and a timer that answers FAILED shortly before Lambda would end the invocation.

Create and Update apply pending migrations (idempotent, serialised by the runner's advisory
lock). Delete does nothing: removing the stack or this resource must never drop data.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Mapping
from typing import Any, Protocol

from aws_lambda_powertools import Logger

PHYSICAL_RESOURCE_ID = "context-ledger-migrations"

#: How long the PUT to the pre-signed URL may take.
RESPONSE_TIMEOUT_SECONDS = 15.0
#: Answer FAILED this long before the invocation's deadline if the migrations are still running.
DEADLINE_MARGIN_SECONDS = 20.0
#: CloudFormation rejects response bodies over 4 KiB; keep the reason well below.
_MAX_REASON = 1000

logger = Logger()


class LambdaContextLike(Protocol):
    """The parts of the Lambda context object this handler uses."""

    log_group_name: str
    log_stream_name: str

    def get_remaining_time_in_millis(self) -> int: ...


class Responder:
    """Sends the one answer CloudFormation expects; later attempts are ignored. (Also the
    answer of the re-embedding custom resource, memory/reembed_job.py.)"""

    def __init__(
        self,
        event: Mapping[str, Any],
        context: LambdaContextLike,
        *,
        physical_id: str = PHYSICAL_RESOURCE_ID,
    ) -> None:
        self._event = event
        self._context = context
        self._lock = threading.Lock()
        self._sent = False
        # One stable id: a changed id on Update would make CloudFormation Delete the "old" one.
        self._physical_id = physical_id
        if event.get("RequestType") == "Delete":
            self._physical_id = str(event.get("PhysicalResourceId") or physical_id)

    def logs_hint(self) -> str:
        group = getattr(self._context, "log_group_name", "?")
        stream = getattr(self._context, "log_stream_name", "?")
        return f"see CloudWatch Logs {group} stream {stream}"

    def send(self, status: str, reason: str, data: Mapping[str, str] | None = None) -> bool:
        """PUT the response; False if an answer was already sent. Raises if the PUT fails."""
        with self._lock:
            if self._sent:
                return False
            body = json.dumps(
                {
                    "Status": status,
                    "Reason": reason[:_MAX_REASON],
                    "PhysicalResourceId": self._physical_id,
                    "StackId": self._event.get("StackId"),
                    "RequestId": self._event.get("RequestId"),
                    "LogicalResourceId": self._event.get("LogicalResourceId"),
                    "NoEcho": False,
                    "Data": dict(data or {}),
                }
            ).encode()
            request = urllib.request.Request(  # noqa: S310 - CloudFormation's https URL
                self._event["ResponseURL"],
                data=body,
                method="PUT",
                # The URL is signed without a content type; sending one breaks the signature.
                headers={"Content-Type": ""},
            )
            with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_SECONDS) as response:  # noqa: S310
                response.read()
            self._sent = True
            logger.info("custom resource response sent", extra={"status": status})
            return True


def _failure_summary(exc: BaseException) -> str:
    try:
        from context_ledger.db.direct import failure_summary
    except Exception:  # a broken layer: the class name is all that is safe to say
        return type(exc).__name__
    return failure_summary(exc, task="a migration")


def _apply_migrations() -> dict[str, str]:
    # Imported here rather than at module level so that a broken layer or bad configuration
    # still ends in a FAILED answer instead of an init error that leaves the stack waiting.
    from context_ledger.db.direct import direct_conninfo
    from context_ledger.db.migrate import available_migrations, migrate
    from context_ledger.settings import get_settings

    applied = migrate(direct_conninfo(get_settings()))
    available = available_migrations()
    return {
        "applied": ",".join(f"{m.version:04d}" for m in applied),
        "latest": f"{available[-1].version:04d}" if available else "",
    }


def handler(event: dict[str, Any], context: LambdaContextLike) -> None:
    request_type = event.get("RequestType")
    log_keys = {
        "request_type": request_type,
        "logical_resource_id": event.get("LogicalResourceId"),
        "cfn_request_id": event.get("RequestId"),
    }
    if "ResponseURL" not in event:
        logger.error("not a CloudFormation custom resource event", extra=log_keys)
        return
    logger.info("custom resource request", extra=log_keys)
    responder = Responder(event, context)

    def deadline_reached() -> None:
        try:
            if responder.send("FAILED", f"migrations timed out; {responder.logs_hint()}"):
                logger.error("answered FAILED before the invocation deadline", extra=log_keys)
        except Exception:
            logger.exception("could not send the timeout response", extra=log_keys)

    remaining = context.get_remaining_time_in_millis() / 1000
    timer = threading.Timer(max(remaining - DEADLINE_MARGIN_SECONDS, 0.0), deadline_reached)
    timer.daemon = True
    timer.start()
    try:
        try:
            if request_type == "Delete":
                status, data = "SUCCESS", {"applied": ""}
                reason = "migrations are never undone; the data stays"
            elif request_type in ("Create", "Update"):
                data = _apply_migrations()
                status = "SUCCESS"
                reason = (
                    f"applied {data['applied']}"
                    if data["applied"]
                    else f"schema up to date at {data['latest'] or 'no migrations'}"
                )
            else:
                status, data = "FAILED", {}
                reason = f"unsupported request type {str(request_type)[:40]!r}"
        except Exception as exc:  # every failure must still reach CloudFormation
            logger.exception("migrations failed", extra=log_keys)
            status, data = "FAILED", {}
            reason = f"{_failure_summary(exc)}; {responder.logs_hint()}"
        logger.info("migrations finished", extra={**log_keys, "status": status, **data})
        # If this PUT fails the exception escapes on purpose: CloudFormation invokes the
        # function asynchronously, so Lambda retries it (migrate is idempotent).
        responder.send(status, reason, data)
    finally:
        timer.cancel()
