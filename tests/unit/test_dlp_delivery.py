"""The delivery of one answer's texts: what is redacted, what passes as an identifier."""

from __future__ import annotations

import hashlib

import pytest

from context_ledger.attribution.events import MEMORY_IDENTIFIER_KEYS as IDENTIFIER_KEYS
from context_ledger.dlp import delivery, redaction
from context_ledger.dlp.classification import Classification
from context_ledger.dlp.delivery import Delivery
from context_ledger.dlp.policy import DEFAULT_ACTIONS, DlpAction, DlpPolicy
from context_ledger.dlp.redaction import CustomPattern

EMAIL = "jane.roe@example.com"
# An organisation pattern that also matches memory ids: they must survive it.
IDS_TOO = DlpPolicy(patterns=(CustomPattern("ticket", "ctx_[0-9a-f]{12}|TICKET-[0-9]{4}"),))


def test_metadata_strings_are_redacted_at_any_depth_keys_included() -> None:
    metadata = {"headings": ["Intro", f"Mail {EMAIL}"], EMAIL: {"n": 1, "to": [EMAIL]}}

    delivered = Delivery(DlpPolicy()).json(Classification.INTERNAL, metadata)

    assert delivered == {
        "headings": ["Intro", "Mail [REDACTED:email]"],
        "[REDACTED:email]": {"n": 1, "to": ["[REDACTED:email]"]},
    }


def test_a_metadata_value_under_a_key_naming_a_credential_is_redacted_whole() -> None:
    """The value alone is a word with digits; its key says what it is, as ``password: ...``
    in a text does. References, placeholders and values too short for their kind stay."""
    metadata = {
        "password": "Summer2024!Muc",
        "db_password": "Hunter2Hunter!",
        "client_secret": "oauth-Cl13nt-S3cr3t-v4lu3",
        "deploy": {"apiKey": "live-9f8e7d6c5b4a", "Passwort": "sonnenblume"},
        "passwords": [{"pwd": "Tr0ub4dor&3"}],
        "token": "${DEPLOY_TOKEN}",
        "secret": "<redacted>",
        "pw": "ab",
        "title": "Summer2024!Muc",
        "monkey": "banana-2024-split",
    }

    delivered = Delivery(DlpPolicy()).json(Classification.INTERNAL, metadata)

    assert delivered == {
        "password": "[REDACTED:password]",
        "db_password": "[REDACTED:password]",
        "client_secret": "[REDACTED:secret]",
        "deploy": {"apiKey": "[REDACTED:secret]", "Passwort": "[REDACTED:password]"},
        "passwords": [{"pwd": "[REDACTED:password]"}],
        "token": "${DEPLOY_TOKEN}",
        "secret": "<redacted>",
        "pw": "ab",
        "title": "Summer2024!Muc",
        "monkey": "banana-2024-split",
    }


def test_identifier_keys_of_a_memory_chunk_pass_as_stored_even_when_a_pattern_matches() -> None:
    metadata = {"memoryId": "ctx_cc55e4a7bbc5", "memoryRevision": 2, "note": "TICKET-1234"}

    delivered = Delivery(IDS_TOO).redact_json(metadata, identifiers=IDENTIFIER_KEYS)

    assert delivered == {
        "memoryId": "ctx_cc55e4a7bbc5",
        "memoryRevision": 2,
        "note": "[REDACTED:custom_ticket]",
    }


def test_allow_delivers_every_text_as_stored() -> None:
    allow = DlpPolicy(actions={**DEFAULT_ACTIONS, Classification.INTERNAL: DlpAction.ALLOW})
    delivery = Delivery(allow)
    content = f"page {EMAIL}"
    sha256 = hashlib.sha256(content.encode()).digest()

    assert delivery.text(Classification.INTERNAL, EMAIL) == EMAIL
    assert delivery.json(Classification.INTERNAL, {"to": EMAIL}) == {"to": EMAIL}
    assert (
        delivery.content(Classification.INTERNAL, content=content, sha256=sha256, tokens=3).content
        == content
    )
    assert delivery.text(Classification.PUBLIC, EMAIL) == "[REDACTED:email]"


def test_redacted_content_carries_the_hash_and_tokens_of_what_is_delivered() -> None:
    content = f"page {EMAIL}"

    delivered = Delivery(DlpPolicy()).content(
        Classification.PUBLIC, content=content, sha256=b"stored", tokens=99
    )

    assert delivered.content == "page [REDACTED:email]"
    assert delivered.sha256 == hashlib.sha256(b"page [REDACTED:email]").digest()
    assert delivered.tokens < 99


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the redactor scans from now on, with the delivery caches emptied first."""
    texts: list[str] = []
    real = redaction.Redactor.redact

    def counting(self, text: str):
        texts.append(text)
        return real(self, text)

    monkeypatch.setattr(redaction.Redactor, "redact", counting)
    delivery._short_redacted.cache_clear()
    delivery._long_redacted.cache_clear()
    return texts


def test_a_short_text_is_scanned_once_per_process_and_set_of_patterns(
    scanned: list[str],
) -> None:

    for _ in range(3):
        for policy in (DlpPolicy(), IDS_TOO):
            Delivery(policy).text(Classification.INTERNAL, "docs/TICKET-1234.md")

    assert scanned == ["docs/TICKET-1234.md"] * 2
    assert Delivery(IDS_TOO).text(Classification.INTERNAL, "docs/TICKET-1234.md") == (
        "docs/[REDACTED:custom_ticket].md"
    )


def test_a_long_text_is_scanned_once_per_process_and_set_of_patterns(
    scanned: list[str],
) -> None:
    content = "password=Tr0ub4dorXyzzy77 " + "x " * delivery.SHORT_TEXT

    for _ in range(3):
        for policy in (DlpPolicy(), IDS_TOO):
            delivered = Delivery(policy).text(Classification.INTERNAL, content)

    assert len(scanned) == 2
    assert "Tr0ub4dorXyzzy77" not in delivered
