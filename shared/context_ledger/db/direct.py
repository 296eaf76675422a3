"""One connection outside the pool, for an operator's one-off work on a deployed database.

The migrations on deploy (``custom_resource.py``) and the first organisation's bootstrap
(``bootstrap/handler.py``) connect once and answer someone who waits: CloudFormation, or a
person running ``aws lambda invoke``. Both may meet a paused Aurora Serverless v2 cluster, which
resumes on the first connection in about 15 s, longer than the pool's checkout timeout
(``KEYSTONE_DB_POOL_TIMEOUT_SECONDS``, 5 s). And both report failures to that someone, so a
failure is summed up in words that cannot carry a connection string or a secret.
"""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from context_ledger.db.migrate import MigrationError
from context_ledger.db.pool import resolve_conninfo
from context_ledger.settings import Settings, SettingsError

#: A paused Aurora Serverless v2 cluster resumes on the first connection, in about 15 s.
CONNECT_TIMEOUT_SECONDS = 60


def direct_conninfo(settings: Settings) -> str:
    """The database's connection string, with a connect timeout that outlasts a resume."""
    conninfo = resolve_conninfo(settings)
    if "connect_timeout" in conninfo_to_dict(conninfo):
        return conninfo
    return make_conninfo(conninfo, connect_timeout=str(CONNECT_TIMEOUT_SECONDS))


def failure_summary(exc: BaseException, *, task: str) -> str:
    """A short description of ``exc`` that cannot carry a connection string or secret;
    ``task`` names what failed when the database refused a statement ("a migration")."""
    if isinstance(exc, MigrationError | SettingsError):
        return str(exc)  # our own messages: file and variable names only, never values
    if isinstance(exc, psycopg.Error):
        if exc.sqlstate is None:  # the connection itself failed; its message names the host
            return f"could not connect to the database ({type(exc).__name__})"
        return f"{task} failed in the database (SQLSTATE {exc.sqlstate})"
    response = getattr(exc, "response", None)  # botocore ClientError, e.g. AccessDenied
    if isinstance(response, dict) and isinstance(response.get("Error"), dict):
        code = str(response["Error"].get("Code", "?"))[:60]
        return f"{type(exc).__name__} ({code}) while reading the database secret"
    return type(exc).__name__
