"""Passwords written in sentences (dlp/detectors/prose.py and the prose rules of the named-key
detector): the forms people use in notes, tickets and chat are redacted, and sentences about
passwords, or the algorithms that hash them, are left as written."""

from __future__ import annotations

import pytest

from context_ledger.dlp.detectors.prose import chosen_password
from context_ledger.dlp.redaction import Redactor

REDACTOR = Redactor()


@pytest.mark.parametrize(
    ("text", "password"),
    [
        ("The password for the admin account is 'Adm1n!2024'", "Adm1n!2024"),
        ("The wifi password for guests is Gr4n1te&Fox16 today.", "Gr4n1te&Fox16"),
        ("Password for root: Gr4n1te&Fox19", "Gr4n1te&Fox19"),
        ("The new password is now Blu3-Moon-88", "Blu3-Moon-88"),
        ("The password was set to Gr4n1te&Fox7", "Gr4n1te&Fox7"),
        ("The password is: Gr4n1te&Fox4", "Gr4n1te&Fox4"),
        ("The password, Gr4n1te&Fox8, was shared.", "Gr4n1te&Fox8"),
        ("**password**: Gr4n1te&Fox10", "Gr4n1te&Fox10"),
        ("`password`: Gr4n1te&Fox12", "Gr4n1te&Fox12"),
        ("password → Gr4n1te&Fox18", "Gr4n1te&Fox18"),
        ("Password:\n    Gr4n1te&Fox27", "Gr4n1te&Fox27"),
        ("the password is Summer2024!", "Summer2024!"),
        ("Das Passwort für den Server lautet Geh31m&Sicher.", "Geh31m&Sicher"),
        ("le mot de passe du wifi est Tr0ub4dor", "Tr0ub4dor"),
        ("Password for John.Smith2 is Xy12!abcd", "Xy12!abcd"),
        ("The passwords are Gr4n1te&Fox501 and Blu3-Moon-502.", "Blu3-Moon-502"),
        ("Passwords: Gr4n1te&Fox500", "Gr4n1te&Fox500"),
        ("password: >\n  Gr4n1te&Fox214", "Gr4n1te&Fox214"),
        ("Password:\n```\nGr4n1te&Fox514\n```", "Gr4n1te&Fox514"),
        ("Password is:\n\n```\nGr4n1te&Fox515\n```", "Gr4n1te&Fox515"),
        ("**Password**\n\nGr4n1te&Fox422", "Gr4n1te&Fox422"),
        ("- password\n- Gr4n1te&Fox56", "Gr4n1te&Fox56"),
        ("Password\n: Gr4n1te&Fox415", "Gr4n1te&Fox415"),
        ("<td>Password</td><td>Gr4n1te&Fox414</td>", "Gr4n1te&Fox414"),
        (
            "The password that we agreed on for the staging box last week is Gr4n1te&Fox40",
            "Gr4n1te&Fox40",
        ),
        ("Gr4n1te&Fox57 is the password.", "Gr4n1te&Fox57"),
        ("Use Gr4n1te&Fox58 as password for root.", "Gr4n1te&Fox58"),
    ],
)
def test_a_password_a_few_words_after_the_word_for_it_is_redacted(text: str, password: str) -> None:
    assert password not in REDACTOR.redact(text).text


@pytest.mark.parametrize(
    "text",
    [
        "The password is case-sensitive.",
        "The password is user-defined, write-only and one-time.",
        "Your password is case-sensitive and must be 12+ characters.",
        "The password is (optional)",
        "The password was end-to-end encrypted",
        "Passwords are hashed with PBKDF2-HMAC-SHA256 and bcrypt-sha256.",
        "password hashing: argon2id",
        "Reset your password at https://example.com/reset?t=Ab12cd34",
        "The password must be at least 12 characters long.",
        "# Password Security: A Case History",
        "# The Password Is Case-Sensitive",
        "# Password Policy v1.2-RC3",
        "The password is hashed using Argon2id before storage.",
        "Password storage: Argon2id (m=19456, t=2, p=1).",
        "Password managers like Bitwarden and 1Password are allowed.",
        "Password is required for sudo on Ubuntu22.04 hosts.",
        "see password.txt for the rotation schedule",
    ],
)
def test_a_sentence_about_passwords_is_left_as_written(text: str) -> None:
    assert REDACTOR.redact(text).counts == {}


@pytest.mark.parametrize(
    ("word", "chosen"),
    [
        ("Gr4n1te&Fox16", True),
        ("Blu3-Moon-88", True),
        ("Tr0ub4dor", True),
        ("Argon2id", False),  # digits in one place: a name with a version
        ("Ubuntu22.04", False),
        ("v1.2-RC3", False),
        ("hunter2", False),  # short: a word in a sentence
        ("letmein!", False),  # no digit
        ("PBKDF2-HMAC-SHA256", False),
        ("bcrypt-sha256", False),
        ("https://x.io/?a=B1c2d3", False),
    ],
)
def test_the_shape_of_a_chosen_password(word: str, chosen: bool) -> None:
    assert chosen_password(word) is chosen


@pytest.mark.parametrize(
    ("table", "secrets"),
    [
        ("| user | password |\n|---|---|\n| root | Gr4n1te&Fox39 |\n| app | hunter22 |", 2),
        ("| Host | User | Password |\n| :--- | --- | ---: |\n| db1 | root | `Gr4n1te&Fox4` |", 1),
        ("| name | API key |\n|------|---------|\n| prod | 8f9a7b6c5d4e3f2a1b0c |", 1),
    ],
    ids=["two rows", "aligned, in code", "an API key column"],
)
def test_a_markdown_table_column_named_like_a_credential_is_redacted(
    table: str, secrets: int
) -> None:
    redacted = REDACTOR.redact(table)

    assert sum(redacted.counts.values()) == secrets
    assert "Gr4n1te" not in redacted.text
    assert "hunter22" not in redacted.text
    assert redacted.text.splitlines()[0] == table.splitlines()[0], "the header stays"


@pytest.mark.parametrize(
    "table",
    [
        "| user | password |\n|---|---|\n| root | ******** |\n| ci | (in the vault) |",
        "| Feature | Password policy |\n|---|---|\n| length | twelve |",
        "| a | b |\n|---|---|\n| password | reset weekly |",
    ],
    ids=["masked and referenced", "a column about passwords", "a cell naming passwords"],
)
def test_a_table_without_a_credential_value_is_left_as_written(table: str) -> None:
    assert REDACTOR.redact(table).counts == {}
