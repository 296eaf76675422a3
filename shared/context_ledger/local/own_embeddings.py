"""``context-ledger dev`` points the stack at its own embeddings function, as a deployment can.

A deployment serves all-MiniLM-L6-v2 at ``POST /api/v1/embeddings`` (``EmbeddingsFunction``) and,
to search with it, needs a service API key and four parameters pointing the functions at that
route (docs/api.md, "Embeddings inside the deployment"). The local runtime serves the same function,
so ``dev`` does those steps itself unless told not to (``--embeddings none``, ``make dev
EMBEDDINGS=none``) or an endpoint is configured already (``KEYSTONE_CONTEXT_EMBEDDINGS_URL`` in
the shell wins):

- a service API key of the home's own organisation "Local services", minted on first use and
  kept in ``<home>/keys/embeddings-service.key`` (mode 0600); minted again when the database no
  longer knows it (a new ``DATABASE_URL``, a reset database);
- ``KEYSTONE_CONTEXT_EMBEDDINGS_URL`` = the runtime's own ``/api/v1``, ``_MODEL``, ``_DIMENSIONS``
  and ``_API_KEY`` = that key. The endpoint is on loopback, so its locality is ``in_deployment``.

The key's organisation is not the callers': the function's rate limits count its requests there,
never against an organisation that ingests or retrieves.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from context_ledger.auth.api_keys import create_api_key, principal_for_api_key
from context_ledger.spaces.service import create_organisation

#: What EmbeddingsFunction serves by default (embeddings/minilm.py's MODEL_NAME and DIMENSIONS;
#: that module is not imported here: it loads numpy, whose BLAS must first see the function's
#: OPENBLAS_NUM_THREADS=1, which the runtime sets when it starts).
MODEL = "all-MiniLM-L6-v2"
DIMENSIONS = 384
KEY_FILE = Path("keys") / "embeddings-service.key"
ORGANISATION = "Local services"


def service_key(database_url: str, home: Path) -> str:
    """The home's embeddings service key, minted if the database does not know the kept one."""
    path = home / KEY_FILE
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        if path.exists():
            key = path.read_text().strip()
            if principal_for_api_key(conn, key) is not None:
                return key
        org = create_organisation(conn, name=ORGANISATION)
        issued = create_api_key(
            conn, org_id=org.id, user_id="embeddings", name="context-ledger dev", service=True
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(issued.key + "\n")
    return issued.key


def variables(*, port: int, key: str) -> dict[str, str]:
    """The functions' environment pointing them at the runtime's own embeddings route."""
    return {
        "KEYSTONE_CONTEXT_EMBEDDINGS_URL": f"http://127.0.0.1:{port}/api/v1",
        "KEYSTONE_CONTEXT_EMBEDDINGS_MODEL": MODEL,
        "KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS": str(DIMENSIONS),
        "KEYSTONE_CONTEXT_EMBEDDINGS_API_KEY": key,
    }
