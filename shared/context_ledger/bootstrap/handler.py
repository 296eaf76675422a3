"""``MigrateFunction``'s bootstrap action: ``aws lambda invoke`` it with
``{"action": "bootstrap", "organisation": ..., "adminUser": ...}``.

The answer is the invocation's payload, the only place the new keys ever appear: every log line
names the organisation and the keys' ids, never a key. Every outcome is an answer with a
``status`` (``created``, ``refused``, ``invalid``, ``failed``) rather than a function error,
whose message Lambda would copy from an exception that may name the database host.
"""

from __future__ import annotations

from typing import Any

import psycopg
from aws_lambda_powertools import Logger
from psycopg.rows import dict_row

from context_ledger.bootstrap.first_organisation import (
    AlreadyBootstrappedError,
    Bootstrapped,
    BootstrapRequestError,
    bootstrap,
    parse_request,
)
from context_ledger.db.direct import direct_conninfo, failure_summary
from context_ledger.settings import get_settings

logger = Logger(child=True)


def handler(event: Any, context: Any) -> dict[str, Any]:
    try:
        request = parse_request(event)
    except BootstrapRequestError as exc:
        logger.warning("bootstrap refused: invalid request", extra={"reason": str(exc)})
        return {"status": "invalid", "message": str(exc)}
    logger.info(
        "bootstrap requested",
        extra={
            "organisation": request.organisation,
            "admin_user": request.admin_user,
            "embeddings_key": request.embeddings_key,
        },
    )
    try:
        with psycopg.connect(
            direct_conninfo(get_settings()), autocommit=True, row_factory=dict_row
        ) as conn:
            done = bootstrap(conn, request)
    except AlreadyBootstrappedError as exc:
        logger.warning(
            "bootstrap refused: an organisation exists",
            extra={"organisation_id": str(exc.organisation_id)},
        )
        return {
            "status": "refused",
            "message": f"{exc}; the bootstrap creates the first one only, and nothing was created",
            "organisationId": str(exc.organisation_id),
        }
    except Exception as exc:  # the operator gets a safe summary, the log the traceback
        logger.exception("bootstrap failed")
        return {"status": "failed", "message": failure_summary(exc, task="the bootstrap")}
    logger.info(
        "bootstrap done",
        extra={
            "organisation_id": str(done.organisation.id),
            "admin_key_id": str(done.admin_key.id),
            "embeddings_key_id": str(done.embeddings_key.id) if done.embeddings_key else None,
        },
    )
    return _created(done)


def _created(done: Bootstrapped) -> dict[str, Any]:
    expires = done.admin_key.expires_at
    answer: dict[str, Any] = {
        "status": "created",
        "organisationId": str(done.organisation.id),
        "organisationSpaceId": str(done.organisation.space_id),
        "adminUser": done.admin_user,
        "adminApiKey": done.admin_key.key,
        "adminApiKeyExpiresAt": expires.isoformat() if expires else None,
    }
    if done.embeddings_key is not None:
        answer["embeddingsApiKey"] = done.embeddings_key.key
    return answer
