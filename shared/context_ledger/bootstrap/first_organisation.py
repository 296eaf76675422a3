"""Create the first organisation, its organisation space and its administrator's API key, once.

The bootstrap creates, in one transaction:

- the organisation and its organisation space (``spaces.service.create_organisation``);
- an API key for its first administrator: a person (``adminUser``, best the identity provider's
  ``sub`` of that person, so key and tokens name one user) with scope ``context:admin``, expiring
  after ``adminKeyDays`` (default 30): it is how a team starts, not a standing credential;
- with ``"embeddingsKey": true``, a service API key for the in-deployment embeddings function
  (``EmbeddingsApiKeySecretArn``), which refuses people's credentials.

It runs once. While a transaction-scoped advisory lock serialises bootstraps, it looks for any
organisation; when there is one it refuses and creates nothing. So a retry, a second operator or
a misused invoke permission cannot mint another administrator key. Later administrators come from
the identity provider: a token whose ``org_id`` is the organisation's and whose scopes hold
``context:admin`` administers it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from context_ledger.auth.api_keys import IssuedKey, create_api_key
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.spaces import store
from context_ledger.spaces.service import SUBJECT_PATTERN, Organisation, create_organisation

ACTION = "bootstrap"
DEFAULT_ADMIN_KEY_DAYS = 30
MAX_ADMIN_KEY_DAYS = 3650
#: The user id of the embeddings function's service key (its principal's ``userId``).
EMBEDDINGS_USER = "embeddings"

_FIELDS = frozenset({"action", "organisation", "adminUser", "adminKeyDays", "embeddingsKey"})
#: One advisory lock for every bootstrap: "ctxlboot" in ASCII, a bigint.
_LOCK = "SELECT pg_advisory_xact_lock(%(key)s)"
_LOCK_KEY = 0x6374786C626F6F74


class BootstrapRequestError(ValueError):
    """The bootstrap event breaks a rule; the message says which, for the operator."""


class AlreadyBootstrappedError(Exception):
    """The database holds an organisation already; nothing was created."""

    def __init__(self, organisation_id: uuid.UUID, name: str) -> None:
        super().__init__(f"the database already holds an organisation ({name}, {organisation_id})")
        self.organisation_id = organisation_id
        self.name = name


@dataclass(frozen=True)
class BootstrapRequest:
    organisation: str
    admin_user: str
    admin_key_days: int = DEFAULT_ADMIN_KEY_DAYS
    embeddings_key: bool = False


@dataclass(frozen=True)
class Bootstrapped:
    organisation: Organisation
    admin_user: str
    admin_key: IssuedKey
    embeddings_key: IssuedKey | None


def parse_request(event: object) -> BootstrapRequest:
    """The request an event spells, or BootstrapRequestError naming what is wrong."""
    if not isinstance(event, dict):
        raise BootstrapRequestError("the event must be a JSON object")
    unknown = sorted(str(key) for key in set(event) - _FIELDS)
    if unknown:
        raise BootstrapRequestError(f"unknown fields: {', '.join(unknown)}")
    if event.get("action") != ACTION:
        raise BootstrapRequestError(f'"action" must be "{ACTION}"')
    organisation = event.get("organisation")
    if not isinstance(organisation, str) or not 1 <= len(organisation.strip()) <= 200:
        raise BootstrapRequestError('"organisation" must be a name of 1 to 200 characters')
    admin_user = event.get("adminUser")
    if not isinstance(admin_user, str) or not SUBJECT_PATTERN.fullmatch(f"user:{admin_user}"):
        raise BootstrapRequestError(
            '"adminUser" must be a user id of 1 to 200 letters, digits and ._@+:|-'
            " (the identity provider's sub of that person)"
        )
    days = event.get("adminKeyDays", DEFAULT_ADMIN_KEY_DAYS)
    if type(days) is not int or not 1 <= days <= MAX_ADMIN_KEY_DAYS:
        raise BootstrapRequestError(f'"adminKeyDays" must be a whole number 1-{MAX_ADMIN_KEY_DAYS}')
    embeddings_key = event.get("embeddingsKey", False)
    if not isinstance(embeddings_key, bool):
        raise BootstrapRequestError('"embeddingsKey" must be true or false')
    return BootstrapRequest(
        organisation=organisation.strip(),
        admin_user=admin_user,
        admin_key_days=days,
        embeddings_key=embeddings_key,
    )


def bootstrap(conn: psycopg.Connection[Any], request: BootstrapRequest) -> Bootstrapped:
    """Create the first organisation and its keys, or raise AlreadyBootstrappedError."""
    with conn.transaction():
        conn.execute(_LOCK, {"key": _LOCK_KEY})
        existing = store.first_organisation(conn)
        if existing is not None:
            raise AlreadyBootstrappedError(existing["id"], existing["name"])
        organisation = create_organisation(conn, name=request.organisation)
        admin_key = create_api_key(
            conn,
            org_id=organisation.id,
            user_id=request.admin_user,
            name="bootstrap administrator",
            scopes=frozenset({SCOPE_CONTEXT_ADMIN}),
            ttl_seconds=request.admin_key_days * 86400,
        )
        embeddings_key = None
        if request.embeddings_key:
            embeddings_key = create_api_key(
                conn,
                org_id=organisation.id,
                user_id=EMBEDDINGS_USER,
                name="in-deployment embeddings",
                service=True,
            )
    return Bootstrapped(organisation, request.admin_user, admin_key, embeddings_key)
