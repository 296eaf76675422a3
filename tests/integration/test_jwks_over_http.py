"""The JWKS as a deployment reads it, over HTTP from a stand-in identity provider on loopback:
kept for its cache period, refetched for a new key id at most once per 30 s (tokens naming
random key ids never make us hammer the URL), and a document too large or a URL that does not
answer is JwksUnavailableError, never a key."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
import pytest

from context_ledger.auth.jwt_verifier import JwksUnavailableError, JwtVerifier
from context_ledger.auth.local_keys import LocalKeys, ensure_local_keys
from context_ledger.errors import UnauthorizedError

ISSUER, AUDIENCE = "https://idp.test", "context-ledger"


class StandInIdentityProvider:
    """Serves a JWKS document at ``/jwks.json`` and counts the requests for it."""

    def __init__(self, document: bytes) -> None:
        self.document = document
        self.requests = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(provider.document)))
                self.end_headers()
                self.wfile.write(provider.document)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/jwks.json"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@pytest.fixture
def keys(tmp_path: Path) -> LocalKeys:
    return ensure_local_keys(tmp_path)


@pytest.fixture
def idp(keys: LocalKeys) -> Iterator[StandInIdentityProvider]:
    running = StandInIdentityProvider(keys.jwks_path.read_bytes())
    yield running
    running.close()


def verifier(url: str, cache_s: int = 300) -> JwtVerifier:
    return JwtVerifier(jwks_url=url, issuer=ISSUER, audience=AUDIENCE, leeway=0, cache_s=cache_s)


def token(keys: LocalKeys, kid: str | None = None) -> str:
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "org_id": str(uuid.uuid4()),
        "iat": now,
        "exp": now + 600,
    }
    private = keys.private_key_path.read_bytes()
    return jwt.encode(claims, private, algorithm="RS256", headers={"kid": kid or keys.kid})


def test_the_key_set_is_fetched_once_for_its_cache_period(keys, idp) -> None:
    checker = verifier(idp.url)

    for _ in range(3):
        assert checker.verify(token(keys)).user_id == "alice"

    assert idp.requests == 1


def test_random_key_ids_do_not_refetch_the_key_set_within_30_s(keys, idp) -> None:
    checker = verifier(idp.url)
    checker.verify(token(keys))

    for _ in range(20):
        with pytest.raises(UnauthorizedError, match="unknown key"):
            checker.verify(token(keys, kid=f"attacker-{uuid.uuid4()}"))

    assert idp.requests == 1


def test_without_a_cache_period_every_token_refetches(keys, idp) -> None:
    checker = verifier(idp.url, cache_s=0)

    checker.verify(token(keys))
    checker.verify(token(keys))

    assert idp.requests == 2


def test_a_key_set_over_1_mb_is_unavailable(keys, idp) -> None:
    document = json.loads(idp.document)
    idp.document = json.dumps({**document, "padding": "x" * 1_000_001}).encode()

    with pytest.raises(JwksUnavailableError, match="too large"):
        verifier(idp.url).verify(token(keys))


def test_a_key_set_url_that_does_not_answer_is_unavailable(keys, idp) -> None:
    url = idp.url
    idp.close()

    with pytest.raises(JwksUnavailableError, match="cannot read JWKS"):
        verifier(url).verify(token(keys))
