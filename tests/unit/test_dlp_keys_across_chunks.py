"""A private key, however it is written and wherever the chunker cuts it, is redacted in every
piece, down to the last characters.

Keys are drawn as a key generator writes them (random DER bytes in base64, 64, 70 or 76
characters a line), not from the detectors' own fixtures, and stored as Terraform stores them:
escaped inside one JSON line of a tfstate, which the code chunker cuts where the line is too
long. Every chunk is redacted as indexing and delivery redact it, alone.
"""

from __future__ import annotations

import base64
import json
import random

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from context_ledger.dlp.redaction import Redactor
from context_ledger.sources.chunking import chunk_document
from context_ledger.sources.model import Document, SourceKind

REDACTOR = Redactor()
#: A piece shorter than this carries about as much of a key as a guess.
SHORTEST_PIECE = 6


def _pem(rng: random.Random, label: str, der_bytes: int, width: int, newline: str) -> str:
    body = base64.b64encode(rng.randbytes(der_bytes)).decode()
    lines = [body[i : i + width] for i in range(0, len(body), width)]
    return f"-----BEGIN {label}-----{newline}{newline.join(lines)}{newline}-----END {label}-----"


def _tfstate(pem: str, padding: int, indent: int | None) -> str:
    resource = {"type": "tls_private_key", "attributes": {"private_key_pem": pem + "\n"}}
    return json.dumps(
        {"version": 4, "lineage": "x" * padding, "resources": [resource]}, indent=indent
    )


def _longest_leak(body_lines: list[str], redacted: list[str]) -> int:
    """The longest piece of any body line that some redacted chunk still holds."""
    longest = 0
    for line in body_lines:
        for size in range(len(line), max(longest, SHORTEST_PIECE - 1), -1):
            pieces = {line[i : i + size] for i in range(len(line) - size + 1)}
            if any(piece in text for piece in pieces for text in redacted):
                longest = size
                break
    return longest


CASES = [
    (label, der_bytes, width, newline, kind, seed)
    for seed, (label, der_bytes, width, newline, kind) in enumerate(
        [
            ("RSA PRIVATE KEY", 1190, 64, "\n", SourceKind.CODEBASE),  # 2048-bit, PKCS#1
            ("PRIVATE KEY", 2374, 64, "\n", SourceKind.CODEBASE),  # 4096-bit, PKCS#8: 3 chunks
            ("PRIVATE KEY", 2374, 64, "\r\n", SourceKind.DOCS),
            ("OPENSSH PRIVATE KEY", 1800, 70, "\n", SourceKind.CODEBASE),
            ("ENCRYPTED PRIVATE KEY", 1250, 76, "\n", SourceKind.DOCS),
            ("EC PRIVATE KEY", 121, 64, "\n", SourceKind.CODEBASE),
        ]
    )
]


@pytest.mark.parametrize(("label", "der_bytes", "width", "newline", "kind", "seed"), CASES)
def test_escaped_key_in_a_tfstate_leaves_no_piece_in_any_chunk(
    label: str, der_bytes: int, width: int, newline: str, kind: SourceKind, seed: int
) -> None:
    rng = random.Random(seed)
    for _ in range(8):  # the cuts fall elsewhere in the key with each padding
        pem = _pem(rng, label, der_bytes, width, newline)
        text = _tfstate(pem, padding=rng.randint(0, 900), indent=rng.choice([None, 2]))
        chunks = chunk_document(Document("terraform.tfstate", text, "json"), kind=kind)
        redacted = [REDACTOR.redact(chunk.content).text for chunk in chunks]
        body_lines = pem.split(newline)[1:-1]
        assert _longest_leak(body_lines, redacted) == 0, [c.content[:80] for c in chunks]


def _one_line(pem: str) -> str:
    """A key pasted into a ``.env`` with its breaks removed."""
    return "RSA_KEY=" + pem.replace("\n", "") + "\n"


def _php_json(pem: str) -> str:
    """A service account's JSON as PHP's ``json_encode`` writes it: slashes escaped too."""
    return json.dumps({"type": "service_account", "private_key": pem + "\n"}).replace("/", "\\/")


def _json_in_json(pem: str) -> str:
    """A secret's JSON stored as a string inside JSON (a Secrets Manager ``SecretString``)."""
    return json.dumps({"SecretString": json.dumps({"private_key": pem + "\n"})})


def _joined_by_spaces(pem: str) -> str:
    return "KEY=" + pem.replace("\n", " ") + "\n"


@pytest.mark.parametrize(
    ("path", "write"),
    [
        ("one-line.env", _one_line),
        ("service-account.json", _php_json),
        ("secret.json", _json_in_json),
        ("spaces.env", _joined_by_spaces),
    ],
    ids=["no breaks", "slashes escaped", "json in json", "joined by spaces"],
)
@pytest.mark.parametrize("der_bytes", [1190, 2374], ids=["2048-bit", "4096-bit"])
def test_a_key_written_any_way_leaves_no_piece_in_any_chunk(path, write, der_bytes) -> None:
    rng = random.Random(der_bytes)
    for padding in range(0, 900, 150):
        pem = _pem(rng, "PRIVATE KEY", der_bytes, 64, "\n")
        text = "# " + "x" * padding + "\n" + write(pem)
        chunks = chunk_document(Document(path, text), kind=SourceKind.CODEBASE)
        redacted = [REDACTOR.redact(chunk.content).text for chunk in chunks]
        body_lines = [line.replace("/", "") for line in pem.split("\n")[1:-1]]
        # slashes may be escaped in the text, so pieces are looked for without them
        unslashed = [text.replace("\\/", "").replace("/", "") for text in redacted]
        assert _longest_leak(body_lines, unslashed) == 0, (padding, len(chunks))


def test_a_certificate_after_a_key_in_one_json_line_stays_readable() -> None:
    rng = random.Random(11)
    key = _pem(rng, "EC PRIVATE KEY", 121, 64, "\n")
    body = base64.b64encode(rng.randbytes(900)).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    cert = f"-----BEGIN CERTIFICATE-----\n{lines}\n-----END CERTIFICATE-----\n"
    text = json.dumps({"private_key_pem": key + "\n", "cert_pem": cert})

    redacted = REDACTOR.redact(text).text

    assert key.split("\n")[1][:20] not in redacted
    assert json.loads(redacted)["cert_pem"] == cert


def test_a_tfstate_key_is_cut_into_chunks_holding_neither_end() -> None:
    """The case the body detector exists for: a middle chunk without BEGIN or END."""
    rng = random.Random(7)
    text = _tfstate(_pem(rng, "PRIVATE KEY", 2374, 64, "\n"), padding=0, indent=None)
    chunks = chunk_document(Document("terraform.tfstate", text, "json"), kind=SourceKind.CODEBASE)
    assert any("BEGIN" not in c.content and "END" not in c.content for c in chunks)


def test_a_certificate_escaped_in_json_stays_readable() -> None:
    """Public material shown whole is not a key: its body is not redacted."""
    rng = random.Random(3)
    body = base64.b64encode(rng.randbytes(900)).decode()
    lines = "\\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    pem = f"-----BEGIN CERTIFICATE-----\\n{lines}\\n-----END CERTIFICATE-----\\n"
    text = f'{{"certificate_pem": "{pem}"}}'
    assert REDACTOR.redact(text).text == text


def _der_keys() -> dict[str, bytes]:
    der, none = serialization.Encoding.DER, serialization.NoEncryption()
    pkcs8, traditional = (
        serialization.PrivateFormat.PKCS8,
        serialization.PrivateFormat.TraditionalOpenSSL,
    )
    keys = {
        "rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ec": ec.generate_private_key(ec.SECP256R1()),
    }
    found = {
        f"{name} {form}": key.private_bytes(der, fmt, none)
        for name, key in keys.items()
        for form, fmt in (("pkcs8", pkcs8), ("traditional", traditional))
    }
    found["ed25519 pkcs8"] = ed25519.Ed25519PrivateKey.generate().private_bytes(der, pkcs8, none)
    return found


@pytest.mark.parametrize("upper", [False, True], ids=["lower", "upper"])
def test_a_private_key_written_as_hex_der_is_redacted(upper: bool) -> None:
    for form, key in _der_keys().items():
        written = key.hex().upper() if upper else key.hex()
        text = f"KEY_HEX={written}\n"
        assert written[8:40] not in REDACTOR.redact(text).text, form


def test_public_keys_and_digests_in_hex_stay_readable() -> None:
    public = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    der = serialization.Encoding.DER
    formats = (serialization.PublicFormat.SubjectPublicKeyInfo, serialization.PublicFormat.PKCS1)
    for fmt in formats:
        text = f"pub={public.public_bytes(der, fmt).hex()}"
        assert "[REDACTED:private_key]" not in REDACTOR.redact(text).text, fmt
    digest = "sha256=" + "3082" + "0201008" * 9
    assert REDACTOR.redact(digest).text == digest
