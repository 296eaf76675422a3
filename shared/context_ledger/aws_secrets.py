"""Keys for outside services: from a variable, or from AWS Secrets Manager, re-read as they rotate.

An API key is configured either directly (a ``..._API_KEY`` variable, for local use) or as the ARN
of a Secrets Manager secret whose string is the key (deployments). A :class:`SecretKey` reads the
secret through Powertools' parameters utility, which keeps it for ``max_age`` seconds and then
reads it again, so a rotated key is picked up by warm Lambda containers without a redeploy.
"""

from __future__ import annotations

#: How long a key read from Secrets Manager is used before it is read again.
KEY_MAX_AGE_SECONDS = 300


class SecretKey:
    """A key given directly, or read from a secret and cached for ``max_age`` seconds.

    Calling it returns the key, or None when neither is configured. Reading the secret may raise
    (Powertools' ``GetParameterError``, carrying boto3's message); callers turn that into their
    own 503.

    The cache is Powertools' one per process, keyed by the secret's ARN: two keys naming one
    secret share a read, and the first read's ``max_age`` holds until it expires. Powertools
    keeps nothing for ``max_age=0`` (every call reads) and never keeps a failed read.
    """

    def __init__(
        self, value: str | None, secret_arn: str | None, *, max_age: int = KEY_MAX_AGE_SECONDS
    ) -> None:
        self._value = value
        self._secret_arn = secret_arn
        self._max_age = max_age

    def __repr__(self) -> str:
        source = "value" if self._value else "secret" if self._secret_arn else "none"
        return f"SecretKey(from={source})"

    def __call__(self) -> str | None:
        if self._value:
            return self._value
        if not self._secret_arn:
            return None
        # Imported here: only AWS deployments read secrets, and the utility imports boto3.
        from aws_lambda_powertools.utilities import parameters

        key: object = parameters.get_secret(self._secret_arn, max_age=self._max_age)
        if not isinstance(key, str):  # a SecretBinary: not a key we can send
            raise TypeError("the secret holds no SecretString")
        return key.strip() or None
