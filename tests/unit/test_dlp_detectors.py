"""Each built-in detector finds its kind and leaves look-alikes (decoys) alone."""

from __future__ import annotations

import random
import string

import pytest

from context_ledger.dlp.detectors.checksums import iban_valid, luhn_valid, nir_valid
from context_ledger.dlp.redaction import Redactor

REDACTOR = Redactor()

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA7bq6XnKcC2rJ0u8d3z9Lr4PZ0aB1c2D3e4F5g6H7i8J9k0L1\n"
    "m2N3o4P5q6R7s8T9u0V1w2X3y4Z5a6B7c8D9e0F1g2H3i4J5k6L7m8N9o0P1q2R3\n"
    "-----END RSA PRIVATE KEY-----"
)

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

FOUND = [
    ("aws_access_key", "key AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws_secret_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    ("private_key", f"key:\n{PEM}\ndone", PEM),
    (
        "jwt",
        "Bearer " + JWT,
        JWT,
    ),
    ("github_token", "GH=ghp_" + "aB3" * 12, "ghp_" + "aB3" * 12),
    ("slack_token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", None),
    ("stripe_key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", None),
    ("google_api_key", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", None),
    ("openai_key", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", None),
    ("ctxl_api_key", "ctxl_" + "Zq9_xY8-wV7" * 4, None),
    ("password_in_url", "postgres://app:s3cr3t@db:5432/x", "s3cr3t"),
    ("password", 'password = "hunter2"', "hunter2"),
    ("password", "DB_PASSWORD=correct-horse", "correct-horse"),
    ("password", "PGPASSWORD=s3cretpass psql -h db", "s3cretpass"),
    ("password", "why does DB_PASSWORD=correct-horse835 fail?", "correct-horse835"),
    ("secret", "export API_TOKEN=abc123def456 && ./run", "abc123def456"),
    ("password", '{"password": "p@ss w0rd"}', "p@ss w0rd"),
    ("secret", 'client_secret: "9f8e7d6c5b4a3210fedcba98"', "9f8e7d6c5b4a3210fedcba98"),
    ("auth_header", "Authorization: Bearer abcdef0123456789xyz", "abcdef0123456789xyz"),
    ("high_entropy", 'x = "Zx9kQ2mPq7Lr4tVb8nWc3yHd"', "Zx9kQ2mPq7Lr4tVb8nWc3yHd"),
    ("email", "mail john.doe+x@example.co.uk today", "john.doe+x@example.co.uk"),
    ("email", "https://app.example.com/invite?to=ann@example.org", "ann@example.org"),
    ("email", "notes/alice.smith@example.org.md", "alice.smith@example.org"),
    ("phone", "call +1 415 555 2671.", "+1 415 555 2671"),
    ("phone", "call (415) 555-2671", "(415) 555-2671"),
    ("phone", "ring 020 7946 0958", "020 7946 0958"),
    ("phone", "appelez 01 23 45 67 89", "01 23 45 67 89"),
    ("payment_card", "card 4111 1111 1111 1111 exp", "4111 1111 1111 1111"),
    ("payment_card", "amex 378282246310005", "378282246310005"),
    ("iban", "IBAN DE89 3704 0044 0532 0130 00.", "DE89 3704 0044 0532 0130 00"),
    ("iban", "GB82WEST12345698765432", "GB82WEST12345698765432"),
    ("iban", "my iban: de89 3704 0044 0532 0130 00.", "de89 3704 0044 0532 0130 00"),
    ("iban", "es87 7354 9907 8685 3464 6892 with", "es87 7354 9907 8685 3464 6892"),
    ("iban", "pay to ES8773549907868534646892 y", "ES8773549907868534646892"),
    ("payment_card", "card4111111111111111", "4111111111111111"),
    ("payment_card", "cc_4111-1111-1111-1111 exp", "4111-1111-1111-1111"),
    ("us_ssn", "SSN 536-22-1234", "536-22-1234"),
    ("uk_nino", "NI AB 12 34 56 C", "AB 12 34 56 C"),
    ("fr_nir", "NIR 1 84 12 76 451 089 46", "1 84 12 76 451 089 46"),
    ("es_dni", "DNI 12345678Z", "12345678Z"),
]

DECOYS = [
    # A quoted command substitution holding quotes of its own is one reference, not a value.
    'export CONTEXT_LEDGER_TOKEN="$(python3 -c \'print(json.load(open("b.json"))["k"])\')"',
    'export DB_PASSWORD="$(cat "/run/secrets/db")"',
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
    "id 123e4567-e89b-12d3-a456-426614174000",
    "version 1.2.3 released 2024-01-15 at 10:30:00 from 192.168.1.10",
    "timestamp 1700000000000 and order 4111111111111112",
    "integrity sha512-Zx9kQ2mPq7Lr4tVb8nWc3yHdZx9kQ2mPq7Lr4tVb8nWc3yHd==",
    "password = os.environ['DB_PASSWORD']",
    "password: ${DB_PASSWORD}",
    "def login(password: str) -> None: check(password=password)",
    "password_hash = hash_password(raw)",
    "password=get_pw() is called first",
    "password = hunter2 is the classic example",
    "pip install scikit-learn  # see sk-learn-compatible-estimators",
    "git clone git@github.com:acme/repo.git and icon@2x.png",
    "from dataclasses import dataclass\n@dataclass\nclass A: ...",
    "class MD5OfMessageAttributesHandlerFactory2: pass",
    "see /api/v1/context/spaces/Spaces2Handler for details",
    "ssn 000-12-3456 and 666-12-3456 are never issued",
    "iban DE00 3704 0044 0532 0130 00 has a bad check",
    "build 14111111111111111, v1.4111111111111111 and 4111111111111111.5",
    "token = create_token(user)",
    "max_tokens: 4096",
    "send `Authorization: Bearer ctxl_...` with every call",
    "https://user@example.com/path and https://example.com/a:b@c",
]


@pytest.mark.parametrize(("kind", "text", "secret"), FOUND)
def test_detector_finds_its_kind(kind: str, text: str, secret: str | None) -> None:
    expected = secret or text
    findings = REDACTOR.find(text)
    assert [(text[f.start : f.end], f.kind) for f in findings] == [(expected, kind)]


@pytest.mark.parametrize("text", DECOYS)
def test_decoy_is_not_flagged(text: str) -> None:
    assert REDACTOR.find(text) == []


def test_an_iban_in_mixed_case_is_not_read_as_one() -> None:
    """Capitals or all lower case, as people write IBANs; mixed case is an identifier's."""
    text = "ref De89370400440532013000"
    assert "iban" not in {finding.kind for finding in REDACTOR.find(text)}


def test_luhn_and_iban_and_nir_checks() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")
    assert iban_valid("DE89370400440532013000")
    assert not iban_valid("DE89370400440532013001")
    assert not iban_valid("XX89370400440532013000")
    assert nir_valid("184127645108946")
    assert not nir_valid("184127645108947")


def test_pem_block_cut_by_a_chunk_boundary_is_still_redacted() -> None:
    head = PEM.rsplit("\n", 1)[0]  # no END line
    tail = PEM.split("\n", 1)[1]  # no BEGIN line
    assert REDACTOR.redact(head).text == "[REDACTED:private_key]"
    assert REDACTOR.redact(tail).text == "[REDACTED:private_key]"


# A secret key shaped like AWS's (40 characters of standard base64), assigned to a name that says
# nothing (``aws``, ``k``) or standing alone: the entropy detectors are all that stand between it
# and the caller. The documented example holds an upper-case run (``...CYEXAMPLEKEY``) that
# lowers its class switches to 37%.
AWS_SHAPED = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "text",
    [
        f'aws = "{AWS_SHAPED}"',
        f"creds:\n  key: {AWS_SHAPED}\n",
        f"export AWS_X={AWS_SHAPED}",
        f"the key {AWS_SHAPED} was rotated",
        f'{{"k": "{AWS_SHAPED}"}}',
    ],
)
def test_unnamed_aws_shaped_secret_key_is_redacted(text: str) -> None:
    assert AWS_SHAPED not in REDACTOR.redact(text).text


def test_random_standard_base64_keys_are_redacted_without_a_name() -> None:
    """Keys drawn as a provider draws them (not from the detectors' own generators): at most
    1% of 40-character keys may pass unnamed (those lacking a digit or a class mix)."""
    rng = random.Random(20261202)
    alphabet = string.ascii_letters + string.digits + "+/"
    keys = ["".join(rng.choice(alphabet) for _ in range(40)) for _ in range(1000)]
    leaked = [key for key in keys if key in REDACTOR.redact(f"value: {key}\n").text]
    assert len(leaked) <= 10, leaked[:5]


@pytest.mark.parametrize(
    "text",
    [
        "arn:aws:iam::aws:policy/aws-service-role/AWSServiceRoleForEC2FastLaunch",
        "see role/AWSServiceRoleForEC2FastLaunch and analyzer/_AccessAnalyzerForSecurityHubV2",
        "path: rule/VPCFlowLogsEC2TagsManagedRule",
        "document/AWSEC2-RunVssRestoreForSqlDatabase",
        "link uk/2013/01/Choosing_SSL_Version_In_Requests/ here",
    ],
)
def test_names_and_paths_with_slashes_are_not_keys(text: str) -> None:
    assert REDACTOR.redact(text).counts == {}


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("<!-- staging login: app / Qv7$relz9tk%41 -->", "Qv7$relz9tk%41"),
        ("Login: deploy / 5andst0rm#27 (rotate monthly)", "5andst0rm#27"),
        ("creds: svc_etl:Gr4n1te&Fox", "Gr4n1te&Fox"),
        ("sign-in - ops@acme.io / Mapl3!Leaf88", "Mapl3!Leaf88"),
    ],
)
def test_a_login_written_as_user_and_password_is_redacted(text: str, password: str) -> None:
    assert password not in REDACTOR.redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        "login: admin / password",
        "login: see docs/setup.md first",
        "sign-in: alice / <your-password>",
        "login: localhost:8080/admin",
        "Login: use your SSO account",
        "credentials: ci/cd pipeline",
    ],
)
def test_a_login_without_a_secret_looking_password_is_prose(text: str) -> None:
    assert REDACTOR.redact(text).counts == {}


@pytest.mark.parametrize(
    "text",
    [
        "# Password Security: A Case History",
        "Password Protection, Part Two",
        "## Secret Sharing: Shamir's scheme",
        "The password policy: twelve characters at least.",
        "Choose a passphrase carefully; it guards everything.",
    ],
)
def test_a_heading_or_sentence_about_passwords_is_prose(text: str) -> None:
    """A word after "password" and a blank is a value only when it looks like a secret; the
    punctuation ending it in prose (``Security:``) does not make it look like one."""
    assert REDACTOR.redact(text).counts == {}


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("the password is Tr0ub4dor&3.", "Tr0ub4dor&3"),
        ("password Gr4n1te&Fox: rotate it monthly", "Gr4n1te&Fox"),
        ("the passphrase is correct-horse-battery-42!", "correct-horse-battery-42"),
    ],
)
def test_a_secret_looking_password_in_prose_is_redacted_whatever_ends_its_sentence(
    text: str, password: str
) -> None:
    assert password not in REDACTOR.redact(text).text


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("Passwort: Geh31m&Sicher", "Geh31m&Sicher"),
        ("Kennwort=Xy12!abcd", "Xy12!abcd"),
        ("Mot de passe : Xy12!abcd", "Xy12!abcd"),
        ("mdp: Xy12!abcd", "Xy12!abcd"),
        ("contraseña: Xy12!abcd", "Xy12!abcd"),
        ("CONTRASEÑA=Xy12!abcd", "Xy12!abcd"),
        ("senha: Xy12!abcd", "Xy12!abcd"),
        ("wachtwoord: Xy12!abcd", "Xy12!abcd"),
        ("hasło: Xy12!abcd", "Xy12!abcd"),
        ("Lösenord: Xy12!abcd", "Xy12!abcd"),
        ("пароль: Xy12!abcd", "Xy12!abcd"),
        ("ПАРОЛЬ: Xy12!abcd", "Xy12!abcd"),
        ("şifre: Xy12!abcd", "Xy12!abcd"),
        ("パスワード: Xy12!abcd", "Xy12!abcd"),
        ("密码: Xy12!abcd", "Xy12!abcd"),
        ('user_passwort = "Abc!12345"', "Abc!12345"),
    ],
)
def test_a_password_labelled_in_another_language_is_redacted(text: str, password: str) -> None:
    assert password not in REDACTOR.redact(text).text


@pytest.mark.parametrize(
    ("text", "secret"),
    [("API key: Xy12abcd9876efgh", "Xy12abcd9876efgh"), ("pass phrase: Xy12!abcd", "Xy12!abcd")],
)
def test_a_key_name_of_several_words_is_read_whole(text: str, secret: str) -> None:
    """``API key`` names a secret where ``key`` alone would need a key-shaped value."""
    assert secret not in REDACTOR.redact(text).text


@pytest.mark.parametrize(
    "text",
    ["Passwort: siehe unten", "Das Passwort ist geheim", "Kennwort vergessen? Hier klicken."],
)
def test_a_sentence_about_a_password_in_another_language_is_prose(text: str) -> None:
    assert REDACTOR.redact(text).counts == {}


_RNG = random.Random(4242)


def _drawn(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


_HEX = "0123456789abcdef"
_UPPER_DIGITS = string.ascii_uppercase + string.digits
_ALNUM = string.ascii_letters + string.digits


@pytest.mark.parametrize(
    ("kind", "token"),
    [
        (
            "slack_token",
            f"xapp-1-A{_drawn(_UPPER_DIGITS, 10)}-{_drawn(string.digits, 13)}-{_drawn(_HEX, 64)}",
        ),
        ("shopify_token", f"shpat_{_drawn(_HEX, 32)}"),
        ("shopify_token", f"shpss_{_drawn(_HEX, 32)}"),
        ("digitalocean_token", f"dop_v1_{_drawn(_HEX, 64)}"),
        (
            "discord_webhook",
            f"https://discord.com/api/webhooks/{_drawn(string.digits, 19)}/{_drawn(_ALNUM, 68)}",
        ),
    ],
)
def test_more_provider_tokens_are_redacted_by_kind(kind: str, token: str) -> None:
    redaction = REDACTOR.redact(f"deploy notes: {token} (rotate monthly)")

    assert token not in redaction.text
    assert dict(redaction.counts) == {kind: 1}
