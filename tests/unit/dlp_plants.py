"""Generators of realistic secrets and personal data of every built-in kind, and decoys.

Shared by the property tests (``test_dlp_properties.py``) and the labelled benchmark sample
(``bench/make_dlp_sample.py``). Each plant is a function of a ``random.Random`` returning
``(text, secret)``: ``secret`` is the part of ``text`` that must not survive redaction.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable

from context_ledger.dlp.detectors.checksums import IBAN_LENGTHS

Plant = Callable[[random.Random], tuple[str, str]]

_UPPER_DIGITS = string.ascii_uppercase + string.digits
_ALNUM = string.ascii_letters + string.digits
_B64URL = _ALNUM + "-_"


def _pick(rng: random.Random, alphabet: str, length: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


def _random_token(rng: random.Random, length: int, alphabet: str = _ALNUM) -> str:
    """A random token that mixes classes, as real keys do (a draw without is retried)."""
    while True:
        token = _pick(rng, alphabet, length)
        if (
            any(c.isdigit() for c in token)
            and any(c.isupper() for c in token)
            and any(c.islower() for c in token)
        ):
            return token


def _luhn_complete(body: str) -> str:
    for check in "0123456789":
        digits = body + check
        total = 0
        for index, char in enumerate(reversed(digits)):
            value = int(char) * (2 if index % 2 else 1)
            total += value - 9 if value > 9 else value
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def aws_access_key(rng: random.Random) -> tuple[str, str]:
    key = "AKIA" + _pick(rng, _UPPER_DIGITS, 16)
    return f'aws_access_key_id = "{key}"', key


def aws_secret_key(rng: random.Random) -> tuple[str, str]:
    key = _random_token(rng, 40, _ALNUM + "/+")
    return f"aws_secret_access_key={key}", key


def private_key(rng: random.Random) -> tuple[str, str]:
    body = "\n".join(_pick(rng, _ALNUM + "+/", 64) for _ in range(rng.randint(3, 8)))
    block = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----"
    return block, block


def jwt(rng: random.Random) -> tuple[str, str]:
    def segment(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    token = ".".join(
        (
            segment({"alg": "HS256", "typ": "JWT"}),
            segment({"sub": _pick(rng, string.digits, 10), "iat": rng.randint(10**9, 2 * 10**9)}),
            _pick(rng, _B64URL, 43),
        )
    )
    return f"Authorization: Bearer {token}", token


def _prefixed(prefix: str, length: int, alphabet: str = _ALNUM) -> Plant:
    def plant(rng: random.Random) -> tuple[str, str]:
        token = prefix + _random_token(rng, length, alphabet)
        return f"TOKEN {token}", token

    return plant


def password_in_url(rng: random.Random) -> tuple[str, str]:
    password = _random_token(rng, rng.randint(8, 16))
    return f"postgres://app_user:{password}@db.internal:5432/app", password


def password(rng: random.Random) -> tuple[str, str]:
    value = rng.choice(["hunter", "s3cret", "Tr0ub4dor", "correct-horse"]) + _pick(
        rng, string.digits, 3
    )
    form = rng.choice(['password = "{}"', "DB_PASSWORD={}", '"password": "{}"', "passwd: '{}'"])
    return form.format(value), value


def secret(rng: random.Random) -> tuple[str, str]:
    value = _pick(rng, "0123456789abcdef", 32)
    return f'client_secret: "{value}"', value


def high_entropy(rng: random.Random) -> tuple[str, str]:
    value = _random_token(rng, rng.randint(32, 48))
    return f'signature = hmac("{value}")', value


def email(rng: random.Random) -> tuple[str, str]:
    user = rng.choice(["jane.doe", "j.smith", "ops+alerts", "marie_curie"]) + _pick(
        rng, string.digits, 2
    )
    address = f"{user}@{rng.choice(['example.com', 'corp.example.org', 'mail.co.uk'])}"
    return f"contact {address} for access", address


def phone(rng: random.Random) -> tuple[str, str]:
    digits = lambda n: _pick(rng, string.digits, n)  # noqa: E731
    number = rng.choice(
        [
            f"+1 {rng.randint(201, 989)} {rng.randint(201, 989)} {digits(4)}",
            f"({rng.randint(201, 989)}) {rng.randint(201, 989)}-{digits(4)}",
            f"+44 20 {digits(4)} {digits(4)}",
            f"020 {digits(4)} {digits(4)}",
            f"0{rng.randint(1, 9)} {digits(2)} {digits(2)} {digits(2)} {digits(2)}",
            f"+49{rng.randint(100, 999)}{digits(7)}",
        ]
    )
    return f"call {number} after 6pm", number


def payment_card(rng: random.Random) -> tuple[str, str]:
    prefix, length = rng.choice([("4", 16), ("51", 16), ("37", 15), ("6011", 16)])
    digits = _luhn_complete(prefix + _pick(rng, string.digits, length - len(prefix) - 1))
    if length == 16 and rng.random() < 0.5:
        digits = " ".join(digits[i : i + 4] for i in range(0, 16, 4))
    return f"card {digits} expires 12/29", digits


def iban(rng: random.Random) -> tuple[str, str]:
    country = rng.choice(["DE", "FR", "GB", "NL", "ES", "IT"])
    length = IBAN_LENGTHS[country]
    if country in ("GB", "NL"):
        bban = _pick(rng, string.ascii_uppercase, 4) + _pick(rng, string.digits, length - 8)
    else:
        bban = _pick(rng, string.digits, length - 4)
    number = "".join(str(int(c, 36)) for c in bban + country + "00")
    compact = f"{country}{98 - int(number) % 97:02d}{bban}"
    spaced = " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))
    value = spaced if rng.random() < 0.5 else compact
    return f"pay to {value} by Friday", value


def us_ssn(rng: random.Random) -> tuple[str, str]:
    value = f"{rng.randint(1, 665):03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"
    return f"SSN: {value}", value


def uk_nino(rng: random.Random) -> tuple[str, str]:
    value = (
        rng.choice("ACEHJKLMPRSTWXY")
        + rng.choice("ABCEHJKLMPRSTWXY")
        + " ".join(_pick(rng, string.digits, 2) for _ in range(3))
        + rng.choice("ABCD")
    )
    return f"NI number {value}", value


def fr_nir(rng: random.Random) -> tuple[str, str]:
    body = (
        rng.choice("12")
        + f"{rng.randint(0, 99):02d}{rng.randint(1, 12):02d}{rng.randint(1, 95):02d}"
        + _pick(rng, string.digits, 6)
    )
    value = f"{body}{97 - int(body) % 97:02d}"
    return f"NIR {value}", value


def es_dni(rng: random.Random) -> tuple[str, str]:
    number = rng.randint(10**7, 10**8 - 1)
    value = f"{number}{'TRWAGMYFPDXBNJZSQVHLCKE'[number % 23]}"
    return f"DNI {value}", value


PLANTS: dict[str, Plant] = {
    "aws_access_key": aws_access_key,
    "aws_secret_key": aws_secret_key,
    "private_key": private_key,
    "jwt": jwt,
    "github_token": _prefixed("ghp_", 36),
    "slack_token": _prefixed("xoxb-", 40),
    "stripe_key": _prefixed("sk_live_", 24),
    "google_api_key": _prefixed("AIza", 35, _ALNUM + "-_"),
    "openai_key": _prefixed("sk-proj-", 48),
    "huggingface_token": _prefixed("hf_", 34),
    "npm_token": _prefixed("npm_", 36),
    "ctxl_api_key": _prefixed("ctxl_", 43, _B64URL),
    "password_in_url": password_in_url,
    "password": password,
    "secret": secret,
    "high_entropy": high_entropy,
    "email": email,
    "phone": phone,
    "payment_card": payment_card,
    "iban": iban,
    "us_ssn": us_ssn,
    "uk_nino": uk_nino,
    "fr_nir": fr_nir,
    "es_dni": es_dni,
}

#: Look-alikes that must not be flagged: hashes, ids, versions, dates, references, code.
DECOYS: tuple[str, ...] = (
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "version 2.31.0 released 2024-03-15 10:30:00",
    "listening on 10.0.12.7:8080",
    "order 4111111111111112 shipped",
    "epoch 1700000000000",
    'password = os.environ["DB_PASSWORD"]',
    "password: ${DB_PASSWORD}",
    "def login(user: str, password: str) -> bool:",
    "check(password=password)",
    "token = create_token(user)",
    "max_tokens: 4096",
    "icon@2x.png",
    "git@github.com:acme/app.git",
    "@dataclass(frozen=True)",
    "class HttpRequestHandlerFactory2:",
    "/api/v1/context/spaces/{spaceId}/grants",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "pip install scikit-learn",
    "000-12-3456 is not a valid SSN",
    "ISBN 978-3-16-148410-0",
)
