"""The formats issue 26 saw leak: each value is redacted whole, and nothing around it is.

Every case names the rule it proves; the input is the shape reported (or its family), the
expected output the input with exactly the secret's span replaced.
"""

from __future__ import annotations

import pytest

from context_ledger.dlp.detectors import Finding
from context_ledger.dlp.redaction import Redaction, Redactor

REDACTOR = Redactor()

# (rule, text, the secret in it)
WHOLE_VALUES = [
    ("a value holding 'secret' is a literal", "password=MySecret123", "MySecret123"),
    ("an env key ending in PASSWORD", "DB_PASSWORD=SuperSecret1", "SuperSecret1"),
    ("a commented-out assignment", "## password=Hunter2Secret99", "Hunter2Secret99"),
    ("'&' inside a value", "password: Tr0ub4dor&3xyzzy", "Tr0ub4dor&3xyzzy"),
    ("';' ',' '@' inside a flag's value", "--password=p@ss,w;rd&x", "p@ss,w;rd&x"),
    ("a flag and its value", "tool --password hunter22x --verbose", "hunter22x"),
    ("a quoted value with quotes inside", 'cfg = {"password": "a\\"b;c d&e"}', 'a\\"b;c d&e'),
    ("a raw '@' in a URL password", "postgres://u:p@ss@host/db", "p@ss"),
    ("a raw '#' in a URL password", 'url = "mysql://api:Sp4rr#el*31@db:3306/x"', "Sp4rr#el*31"),
    (
        "Azure AccountKey in a ';' list",
        "DefaultEndpointsProtocol=https;AccountName=acme;"
        "AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFi+/Y2RlZg==;EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFi+/Y2RlZg==",
    ),
    (
        "a SAS sig in a query string",
        "https://acme.blob.core.windows.net/c?sv=2021-08-06&se=2025-01-01&sig=k3Jd9sL0qP2mXv8R%3D",
        "k3Jd9sL0qP2mXv8R%3D",
    ),
    (
        "a random value under any key",
        "export STRIPE_SK=4eC39HqLyjWDarjtT1zdp7dc",
        "4eC39HqLyjWDarjtT1zdp7dc",
    ),
    ("a random value after --key=", "mytool --key=Xk9pQ2mZ7LrT4vBn8cWs", "Xk9pQ2mZ7LrT4vBn8cWs"),
    ("XML element", "<db.password>s3cr3t!x</db.password>", "s3cr3t!x"),
    ("k8s name/value pair", "- name: DB_PASSWORD\n  value: hunter2xx\n", "hunter2xx"),
    (
        "XML key/value attributes",
        '<add key="MailgunApiKey" value="key-6c4d5a7110a5d4595" />',
        "key-6c4d5a7110a5d4595",
    ),
    (
        "JSON inside a JSON string",
        '"{\\"password\\": \\"Harbor\\\\\\"969.\\"}"',
        'Harbor\\\\\\"969.',
    ),
    (
        "mysql's glued -p",
        "mysqldump -uapp -pHunter2Access144 --single-transaction db",
        "Hunter2Access144",
    ),
    ("redis-cli -a", "redis-cli -h cache -a 'Mo#nkeys$affr0n&36' info", "Mo#nkeys$affr0n&36"),
    ("curl -u user:password", "curl -u deploy:SparrowWalrus4186+ https://x", "SparrowWalrus4186+"),
    ("a .pgpass line", "db.internal:5432:ledger:reporting:QuartzRocket3230%", "QuartzRocket3230%"),
    (
        "Bearer outside a header",
        "log: sent Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0 ok",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
    ),
    (
        "a base64-encoded AWS key",
        "echo QUtJQUlPU0ZPRE5ON0VYQU1QTEU= | base64 -d",
        "QUtJQUlPU0ZPRE5ON0VYQU1QTEU=",
    ),
    (
        "an ADO.NET password in XML quotes",
        "Password=&apos;Nimbus&amp;z3851#&apos;;",
        "Nimbus&amp;z3851#",
    ),
]


@pytest.mark.parametrize(("rule", "text", "secret"), WHOLE_VALUES, ids=[c[0] for c in WHOLE_VALUES])
def test_the_whole_value_is_redacted_and_nothing_else(rule: str, text: str, secret: str) -> None:
    result = REDACTOR.redact(text)
    start = text.index(secret)
    assert [(f.start, f.end) for f in result.findings] == [(start, start + len(secret))]
    kind = result.findings[0].kind
    assert result.text == text[:start] + f"[REDACTED:{kind}]" + text[start + len(secret) :]


DISGUISED = [
    (
        "a zero-width space inside an AWS key",
        "key AK\u200bIAIOSFODNN7EXAMPLE end",
        "AK\u200bIAIOSFODNN7EXAMPLE",
    ),
    (
        "a soft hyphen inside a card number",
        "card 4111 11\u00ad11 1111 1111 ok",
        "4111 11\u00ad11 1111 1111",
    ),
    (
        "fullwidth letters",
        "k=\uff21\uff2b\uff29\uff21IOSFODNN7EXAMPLE",
        "\uff21\uff2b\uff29\uff21IOSFODNN7EXAMPLE",
    ),
    ("Cyrillic look-alikes", "id \u0410KIAIOSFODNN7EX\u0410MPLE", "\u0410KIAIOSFODNN7EX\u0410MPLE"),
    (
        "a key wrapped over two lines",
        "aws_access_key_id = AKIAIOSFOD\nNN7EXAMPLE\nnext: 1",
        "AKIAIOSFOD\nNN7EXAMPLE",
    ),
    ("a backslash continuation", 'k = "AKIAIOSFOD\\\nNN7EXAMPLE"', "AKIAIOSFOD\\\nNN7EXAMPLE"),
    ("concatenated literals", 'k = "AKIAIOSF" + "ODNN7EXAMPLE"', 'AKIAIOSF" + "ODNN7EXAMPLE'),
]


@pytest.mark.parametrize(("rule", "text", "secret"), DISGUISED, ids=[c[0] for c in DISGUISED])
def test_a_disguised_secret_is_redacted_in_the_original_text(
    rule: str, text: str, secret: str
) -> None:
    start = text.index(secret)
    result = REDACTOR.redact(text)
    assert [(f.start, f.end) for f in result.findings] == [(start, start + len(secret))]
    assert result.text.startswith(text[:start])
    assert result.text.endswith(text[start + len(secret) :])


KEPT = [
    "id: 123e4567-e89b-12d3-a456-426614174000",
    "commit=3f786850e387550fdab836ed7e6dc881de23001b",
    '"integrity": "sha512-Zx9kQ2mPq7Lr4tVb8nWc3yHdZx9kQ2mPq7Lr4tVb8nWc3yHd=="',
    "src=data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
    "password: ${DB_PASSWORD}",
    "password: ${DB_PASSWORD:?must be set}",
    "password=$(cat /run/secrets/db)",
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "password: {{ .Values.db.password }}",
    "password: <your-password>",
    "password: changeme",
    "conn = connect(password=password)\\n",
    "version=1.2.3-rc.4+build.20240115",
    "image: python@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBMTmBHrygg+tNq3VaSPlFUG/Rp9JSpyK1NBvthW6yZn me",
    "certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUR4ekNDQWwr",
    "Message-ID: <7ef53f1a91d7181f.1778198880@mail.example.io>",
    "WARNING! Using --password via the CLI is insecure.",
    "GET /cb?access_token=${TOKEN}&token_type=bearer HTTP/1.1",
    "CACHE_BUSTER=124a275a08e1a9749fc32cd893b96cd9\nAPI_KEY_HEADER_NAME=X-Ledger-Key",
    "charge ch_ytAwdW1QC38HIITWezwR4UoD refunded",
]


@pytest.mark.parametrize("text", KEPT)
def test_hard_negatives_are_left_as_written(text: str) -> None:
    assert REDACTOR.redact(text).text == text


def test_redaction_keeps_text_and_counts_and_adds_spans_in_the_input() -> None:
    text = "a\u200b b AKIAIOSFODNN7EXAMPLE and jane@example.org"
    result = REDACTOR.redact(text)
    assert isinstance(result, Redaction)
    assert result.text == "a\u200b b [REDACTED:aws_access_key] and [REDACTED:email]"
    assert dict(result.counts) == {"aws_access_key": 1, "email": 1}
    assert result.findings == (
        Finding(5, 25, "aws_access_key"),
        Finding(30, 46, "email"),
    )
