"""Everything local mode needs under CONTEXT_LEDGER_HOME: database, signing key, HMAC key.
(Signed chain checkpoints go to ``checkpoints/`` there: see evidence.checkpoint_store.)

``context-ledger dev``, the other CLI commands and the test session all call
:func:`prepare_local`, so they agree on one home directory and never collide with another home.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from context_ledger.auth.local_keys import LocalKeys, ensure_local_keys
from context_ledger.db.migrate import migrate
from context_ledger.local.postgres import ensure_database, start_embedded
from context_ledger.settings import Settings, get_settings


@dataclass
class LocalEnvironment:
    home: Path
    database_url: str
    keys: LocalKeys
    hmac_key: str
    #: the id the functions sign entries and checkpoints under: the CLI's, so that
    #: ``context-ledger verify`` on this home knows the key ``context-ledger dev`` appends with
    hmac_key_id: str
    #: the embedded server's handle; keeping it referenced keeps the server running
    server: Any = field(default=None, repr=False)

    def variables(self) -> dict[str, str]:
        """Environment of the functions in local mode (on top of the template's own)."""
        return {
            "KEYSTONE_ENVIRONMENT": "local",
            "CONTEXT_LEDGER_HOME": str(self.home),
            "DATABASE_URL": self.database_url,
            "KEYSTONE_AUTH_JWKS_URL": self.keys.jwks_url,
            "KEYSTONE_EVIDENCE_HMAC_KEY": self.hmac_key,
            "KEYSTONE_EVIDENCE_KEY_ID": self.hmac_key_id,
        }

    def apply(self) -> None:
        """Make this process see the local environment (as Lambda would see its own)."""
        os.environ.update(self.variables())
        get_settings.cache_clear()


def _hmac_key(home: Path) -> str:
    path = home / "keys" / "evidence-hmac.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
    return path.read_text().strip()


def prepare_local(settings: Settings | None = None) -> LocalEnvironment:
    """Start or attach to the database, migrate it, and make sure the keys exist."""
    settings = settings or get_settings()
    home = settings.home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    server = None
    if settings.database_url:
        database_url = settings.database_url
    else:
        server = start_embedded(home / "pgdata")
        database_url = ensure_database(server.get_uri())
    migrate(database_url)
    return LocalEnvironment(
        home=home,
        database_url=database_url,
        keys=ensure_local_keys(home),
        hmac_key=settings.evidence_hmac_key or _hmac_key(home),
        hmac_key_id=settings.evidence_key_id,
        server=server,
    )
