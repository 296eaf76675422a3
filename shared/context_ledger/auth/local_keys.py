"""The local runtime's signing key and JWKS, and tokens signed with them.

``context-ledger dev`` creates an RSA key in ``<home>/keys/`` once; the JWKS beside it is what the
authorizer reads (``KEYSTONE_AUTH_JWKS_URL=file://...``). ``context-ledger token`` signs with it.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


@dataclass(frozen=True)
class LocalKeys:
    private_key_path: Path
    jwks_path: Path
    kid: str

    @property
    def jwks_url(self) -> str:
        return f"file://{self.jwks_path.resolve()}"


def ensure_local_keys(home: Path) -> LocalKeys:
    """Create the signing key and JWKS under ``home/keys`` unless they exist."""
    keys_dir = home / "keys"
    private_path, jwks_path = keys_dir / "signing-key.pem", keys_dir / "jwks.json"
    if not private_path.exists():
        keys_dir.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        public.update(kid=f"local-{uuid.uuid4().hex[:8]}", use="sig", alg="RS256")
        jwks_path.write_text(json.dumps({"keys": [public]}, indent=2))
    kid = json.loads(jwks_path.read_text())["keys"][0]["kid"]
    return LocalKeys(private_key_path=private_path, jwks_path=jwks_path, kid=kid)


def issue_token(
    keys: LocalKeys,
    *,
    issuer: str,
    audience: str,
    org_id: uuid.UUID,
    user_id: str,
    client_id: str = "context-ledger-cli",
    scopes: frozenset[str] = frozenset(),
    groups: frozenset[str] = frozenset(),
    service: bool = False,
    ttl_seconds: int = 12 * 3600,
) -> str:
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": user_id,
        "org_id": str(org_id),
        "client_id": client_id,
        "scope": " ".join(sorted(scopes)),
        "groups": sorted(groups),
        "principal_type": "service" if service else "person",
        "iat": now,
        "exp": now + ttl_seconds,
        "jti": uuid.uuid4().hex,
    }
    private_key = keys.private_key_path.read_bytes()
    return jwt.encode(claims, private_key, algorithm="RS256", headers={"kid": keys.kid})
