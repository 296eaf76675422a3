"""The HTTP contract through the real path: loopback HTTP → local API Gateway → authorizer →
the same handlers Lambda runs, as declared in template.yaml (the session's ``runtime`` and
``local_keys`` are in tests/conftest.py, shared with the security suite)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from context_ledger.auth.local_keys import LocalKeys, issue_token
from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger.db import connection
from context_ledger.dlp import delivery, redaction
from context_ledger.local.runtime import LocalRuntime
from context_ledger.settings import get_settings
from context_ledger.spaces.service import Organisation, create_organisation


@pytest.fixture
def api(runtime: LocalRuntime, db: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=runtime.url, timeout=30) as client:
        yield client


TokenFactory = Callable[..., str]


@pytest.fixture
def token(local_keys: LocalKeys) -> TokenFactory:
    """token(org, user, *scopes, groups=(), service=False) → a bearer token the runtime accepts."""

    def make(org: Organisation, user: str, *scopes: str, groups=(), service=False) -> str:
        settings = get_settings()
        return issue_token(
            local_keys,
            issuer=settings.auth_issuer,
            audience=settings.auth_audience,
            org_id=org.id,
            user_id=user,
            client_id="api-tests",
            scopes=frozenset(scopes),
            groups=frozenset(groups),
            service=service,
        )

    return make


@pytest.fixture
def org(api: httpx.Client) -> Organisation:
    with connection() as conn:
        return create_organisation(conn, name="Acme")


@pytest.fixture
def other_org(api: httpx.Client) -> Organisation:
    with connection() as conn:
        return create_organisation(conn, name="Globex")


@pytest.fixture
def admin_headers(org: Organisation, token: TokenFactory) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(org, 'root', SCOPE_CONTEXT_ADMIN)}"}


@pytest.fixture
def break_scans_of(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """``break_scans_of(marker)``: from then on every scan of a text holding ``marker`` fails
    (the local runtime serves the functions in this process; texts redacted before are
    forgotten, or their cached redaction would answer without a scan)."""
    real = redaction.Redactor.redact

    def arm(marker: str) -> None:
        def redact(self, text: str):
            if marker in text:
                raise redaction.ScanError("detector crashed")
            return real(self, text)

        monkeypatch.setattr(redaction.Redactor, "redact", redact)
        delivery._short_redacted.cache_clear()
        delivery._long_redacted.cache_clear()

    return arm
