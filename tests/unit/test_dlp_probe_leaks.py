"""The shapes a black-box probe of the running service saw delivered unredacted.

Each rule has its leaks (the value redacted, the text around it kept) and the look-alikes that
widening it must not touch (left exactly as written).
"""

from __future__ import annotations

import pytest

from context_ledger.dlp.redaction import Redactor

REDACTOR = Redactor()


def _redacted_alone(text: str, secret: str) -> None:
    """``secret`` is redacted in ``text``, whole, and nothing else is."""
    result = REDACTOR.redact(text)
    start = text.index(secret)
    assert [(f.start, f.end) for f in result.findings] == [(start, start + len(secret))], (
        result.text
    )


def _kept(text: str) -> None:
    assert REDACTOR.redact(text).text == text


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("contact bob.jones@acme-corp.com-ext", "bob.jones@acme-corp.com"),
        ("bob.jones@acme-corp.com_old", "bob.jones@acme-corp.com"),
        ("owner=alice.smith@example.org-team", "alice.smith@example.org"),
        ("bob.jones@acme-corp.com-", "bob.jones@acme-corp.com"),
        ("alias alice.smith@example.org2 retired", "alice.smith@example.org"),
        ("notes/bob.jones@acme-corp.com-handover.md", "bob.jones@acme-corp.com"),
        ("notes/bob.jones@acme-corp.com_handover.md", "bob.jones@acme-corp.com"),
    ],
)
def test_an_email_glued_to_a_hyphen_underscore_or_digit_is_still_an_address(
    text: str, address: str
) -> None:
    _redacted_alone(text, address)


@pytest.mark.parametrize(
    "text",
    [
        "icon@2x.png, logo@3x.webp and sprite@2x-dark.png",
        "npm i pkg@1.2.3 @types/node react@18.3.0-canary2",
        "y = x@self.weights_1 + b",
    ],
)
def test_asset_package_and_code_names_with_an_at_are_no_address(text: str) -> None:
    _kept(text)


def test_a_card_number_glued_to_a_word_by_a_hyphen_is_redacted() -> None:
    _redacted_alone("ref 4111111111111111-x", "4111111111111111")


def test_a_card_number_inside_a_longer_hyphenated_number_is_not_one() -> None:
    _kept("batch 4111111111111111-2024 and 4111-1111-1111-1111-2222")


@pytest.mark.parametrize(
    ("table", "secret"),
    [
        (
            "host | user | password\n---- | ---- | --------\nldap-01 | binder | Ldap!Bind2023\n",
            "Ldap!Bind2023",
        ),
        (
            "Host | Benutzer | Passwort\n--- | --- | ---\nldap-01 | binder | Ldap!Bind2023",
            "Ldap!Bind2023",
        ),
        ("|host|user|password|\n|-|-|-|\n|tight-01|tight|TightPass!77|", "TightPass!77"),
        ("| host | password\n|:-|-:\n| db-02 | Gr4n1te&Fox39\n", "Gr4n1te&Fox39"),
    ],
    ids=["no outer pipes", "no outer pipes, German", "one-dash rule", "no closing pipe"],
)
def test_a_markdown_table_however_its_pipes_and_rule_are_written_is_read(
    table: str, secret: str
) -> None:
    _redacted_alone(table, secret)


@pytest.mark.parametrize(
    "text",
    [
        "Option | Meaning\n--- | ---\n--password | read the password from stdin",
        "Passwords\n---------\nRotate them | yearly, e.g. Spring2024",
        "password: |\n  ---|---\n",
    ],
    ids=["no credential column", "a heading, no pipe", "a YAML block"],
)
def test_a_pipe_and_a_dash_rule_without_a_credential_column_are_left_as_written(
    text: str,
) -> None:
    _kept(text)


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("Passwort", "druckerpasswort"),
        ("mot de passe", "motdepassesecret"),
        ("pass", "nasrootpass"),
        ("Password", "lowercasesecret"),
        ("Password", "passwordpassword"),
    ],
)
def test_a_cell_under_a_credential_column_is_one_whatever_words_it_holds(
    header: str, value: str
) -> None:
    table = f"| host | user | {header} |\n|---|---|---|\n| nas-01 | root | {value} |"
    _redacted_alone(table, value)
    csv = REDACTOR.redact(f"host,user,{header}\nnas-01,root,{value}\n").text
    assert value not in csv
    assert csv.startswith(f"host,user,{header}\n")


def test_a_csv_header_whose_last_column_names_a_credential_is_read() -> None:
    _redacted_alone("host,user,pass\nnas-01,root,Nas!Root2024\nnas-02,root,\n", "Nas!Root2024")


def test_masked_referenced_and_empty_cells_of_a_credential_column_stay() -> None:
    _kept(
        "| host | user | password |\n|---|---|---|\n| a | u | **** |\n| b | u | ${LDAP_PASS} |\n"
        "| c | u | <redacted> |\n| d | u |  |"
    )


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "SECRET_KEY_BASE=a3f9c8e1d2b4a6f8e0c1d3b5a7f9e2c4d6b8a0f1e3c5d7b9a1f2e4c6d8b0a2f1",
            "a3f9c8e1d2b4a6f8e0c1d3b5a7f9e2c4d6b8a0f1e3c5d7b9a1f2e4c6d8b0a2f1",
        ),
        ("  secret_key_base: 9d2c1f0e8b7a6c5d4e3f2a1b\n", "9d2c1f0e8b7a6c5d4e3f2a1b"),
    ],
)
def test_rails_secret_key_base_is_a_secret(text: str, secret: str) -> None:
    _redacted_alone(text, secret)


@pytest.mark.parametrize(
    "text", ["JWT_SECRET=mysupersecretjwtsigningkey", "session_secret: correcthorsebatterystaple"]
)
def test_a_secret_written_as_one_long_lower_case_word_is_a_secret(text: str) -> None:
    _redacted_alone(text, text.split("=")[-1].split(": ")[-1])


@pytest.mark.parametrize(
    "text",
    [
        "secret: my-app-secret",
        "GOOGLE_APPLICATION_CREDENTIALS=/var/secrets/google/key.json",
        "token = authTokenFromSettings",
        "password = db_password_from_vault",
        "password: mypassword",
        "api_key: your_api_key_here",
    ],
)
def test_names_and_placeholders_under_a_secret_key_stay(text: str) -> None:
    _kept(text)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            'curl -H "Cookie: session=8f14e45fceea167a5a36dedd4bea2543" https://app.acme.io',
            "8f14e45fceea167a5a36dedd4bea2543",
        ),
        (
            "Set-Cookie: JSESSIONID=A1B2C3D4E5F60718293A4B5C6D7E8F90; Path=/; HttpOnly",
            "A1B2C3D4E5F60718293A4B5C6D7E8F90",
        ),
        (
            "Cookie: theme=dark; PHPSESSID=5k2n9q1r7t3v8x0z4b6d1f3h5j; lang=en",
            "5k2n9q1r7t3v8x0z4b6d1f3h5j",
        ),
    ],
)
def test_a_session_cookie_value_is_a_secret(text: str, secret: str) -> None:
    _redacted_alone(text, secret)


@pytest.mark.parametrize(
    "text",
    [
        "Cookie: theme=dark; lang=en-GB; _ga=GA1.2.1234567890",
        "Set-Cookie: session=deleted; Max-Age=0",
        "the session cookie is HttpOnly",
    ],
)
def test_other_cookies_and_a_cleared_session_stay(text: str) -> None:
    _kept(text)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("<!-- admin:AdminHtml#2023 -->", "AdminHtml#2023"),
        ("<p>Status</p>\n<!-- root:RootHtmlPass99 -->\n", "RootHtmlPass99"),
    ],
)
def test_a_login_left_in_an_html_comment_is_redacted(text: str, secret: str) -> None:
    _redacted_alone(text, secret)


@pytest.mark.parametrize(
    "text",
    [
        "<!-- wp:core/image -->",
        "<!-- toc:start -->",
        "<!-- prettier-ignore -->",
        "<!-- markdownlint-disable MD033 -->",
        "<!-- image:hero-banner-2x -->",
    ],
)
def test_directives_in_html_comments_stay(text: str) -> None:
    _kept(text)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("The admin creds are admin / Adm1n!Creds", "Adm1n!Creds"),
        ("admin/Admin@12345 is the default login", "Admin@12345"),
        ("The default login is admin/Adm1n!Creds.", "Adm1n!Creds"),
    ],
)
def test_a_user_and_password_beside_a_word_for_a_login_are_redacted(text: str, secret: str) -> None:
    _redacted_alone(text, secret)


@pytest.mark.parametrize(
    "text",
    [
        "Open the admin / settings page",
        "see admin/users for the list",
        "the default login is admin/admin",
        "credentials are stored/rotated weekly",
        "the password policy requires 12 characters",
        "reset your password at https://acme.io/account/reset?step=2",
    ],
)
def test_paths_and_sentences_about_logins_stay(text: str) -> None:
    _kept(text)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("The wifi key is GuestWifi2024!", "GuestWifi2024!"),
        ("Wi-Fi key: GuestWifi2024!", "GuestWifi2024!"),
        ("vault unseal key is 9f3c-1a2b-7d8e-4f6a", "9f3c-1a2b-7d8e-4f6a"),
        (
            "BitLocker recovery key: 412357-103774-525965-140681-295294-608212-330308-472285",
            "412357-103774-525965-140681-295294-608212-330308-472285",
        ),
    ],
)
def test_wifi_unseal_and_recovery_keys_are_credentials(text: str, secret: str) -> None:
    _redacted_alone(text, secret)


@pytest.mark.parametrize(
    "text",
    [
        "the wifi key is printed on the router",
        "Store each unseal key share offline",
        "Print the recovery key and store it offline",
    ],
)
def test_sentences_about_wifi_unseal_and_recovery_keys_stay(text: str) -> None:
    _kept(text)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("パスワードは Tokyo#2024pw です", "Tokyo#2024pw"),
        ("管理者のパスワードは Tokyo#2024pw です", "Tokyo#2024pw"),
        ("数据库密码是 Beijing#2024pw", "Beijing#2024pw"),
        ("密碼為 Taipei#2024pw", "Taipei#2024pw"),
        ("관리자 비밀번호는 Seoul#2024pw 입니다", "Seoul#2024pw"),
        ("パスワード\uff1aTokyo#2024pw", "Tokyo#2024pw"),  # a fullwidth colon
        ("新しいパスワードは Tokyo#2024pw。", "Tokyo#2024pw"),
    ],
)
def test_a_password_after_a_japanese_chinese_or_korean_word_for_it_is_redacted(
    text: str, secret: str
) -> None:
    _redacted_alone(text, secret)


def test_a_japanese_sentence_about_a_password_stays() -> None:
    _kept("パスワードを忘れた場合は管理者に連絡してください")


def test_basic_credentials_after_a_basic_label_are_redacted() -> None:
    # base64 of "user:Passw0rd!"
    _redacted_alone("HTTP Basic: dXNlcjpQYXNzdzByZCE=", "dXNlcjpQYXNzdzByZCE=")


def test_a_basic_label_before_base64_of_no_login_stays() -> None:
    # base64 of "this is not auth"
    _kept("basic: dGhpcyBpcyBub3QgYXV0aA==")


DIGEST = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"


@pytest.mark.parametrize(
    "text",
    [
        f"image: ghcr.io/acme/widgetron:2.14.3@sha256:{DIGEST}",
        f"    image: quay.io/org/app:v1@sha256:{DIGEST}",
        f"FROM registry.example.com:5000/team/app@sha256:{DIGEST}",
        "Key ID: 0x6A3F2B1C9D8E7F00",
        "contract: 0x52908400098527886E0F7030069857D2E4169EE7",
    ],
    ids=["ghcr", "quay", "registry port", "gpg key id", "hex literal"],
)
def test_names_pinned_by_a_digest_and_hex_literals_stay(text: str) -> None:
    """Pure hexadecimal is no high-entropy finding (the entropy module's rule): neither is a
    digest after an image's name and tag, nor a 0x literal (a probe saw both redacted whole)."""
    _kept(text)


def test_a_password_pinned_like_an_image_is_still_a_password() -> None:
    _redacted_alone(f"password: Tr0ub4dor@sha256:{DIGEST}", f"Tr0ub4dor@sha256:{DIGEST}")
