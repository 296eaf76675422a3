"""Keys for outside services: from a variable, or from AWS Secrets Manager, re-read as they rotate.

An API key is configured either directly (a ``..._API_KEY`` variable, for local use) or as the ARN
of a Secrets Manager secret whose string is the key (deployments). A :class:`SecretKey` reads the
secret on first use and again once it is older than ``max_age`` seconds, so a rotated key is
picked up by warm Lambda containers without a redeploy.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: How long a key read from Secrets Manager is used before it is read again.
KEY_MAX_AGE_SECONDS = 300.0


def secret_string(secret_arn: str) -> str:
    """The current ``SecretString`` of a Secrets Manager secret."""
    import boto3  # imported here: only AWS deployments read secrets

    secret: Any = boto3.client("secretsmanager").get_secret_value(SecretId=secret_arn)
    return str(secret["SecretString"])


class SecretKey:
    """A key given directly, or read from a secret and cached for ``max_age`` seconds.

    Calling it returns the key, or None when neither is configured. Reading the secret may raise
    (boto3 errors); callers turn that into their own 503.
    """

    def __init__(
        self,
        value: str | None,
        secret_arn: str | None,
        *,
        max_age: float = KEY_MAX_AGE_SECONDS,
        read_secret: Callable[[str], str] = secret_string,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._value = value
        self._secret_arn = secret_arn
        self._max_age = max_age
        self._read_secret = read_secret
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: tuple[float, str | None] | None = None

    def __repr__(self) -> str:
        source = "value" if self._value else "secret" if self._secret_arn else "none"
        return f"SecretKey(from={source})"

    def __call__(self) -> str | None:
        if self._value:
            return self._value
        if not self._secret_arn:
            return None
        with self._lock:
            now = self._clock()
            if self._cached is None or now - self._cached[0] >= self._max_age:
                key = self._read_secret(self._secret_arn).strip()
                self._cached = (now, key or None)
            return self._cached[1]
