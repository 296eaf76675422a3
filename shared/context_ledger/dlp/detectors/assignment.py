"""``key = value``: where a value ends, whether it is a literal, and the detector for named keys.

A value is read the way the format it sits in delimits it, never by the characters a secret may
hold (``password: Tr0ub4dor&3xyzzy`` is one value):

- quoted: up to the matching unescaped quote on the same line (spaces, ``&``, ``;`` included);
- in a ``;``-separated connection string (the key follows a ``;``): up to the next ``;``;
- in a query string (the key follows ``?`` or ``&``): up to the next ``&`` or ``#``;
- otherwise (code, config, env files, shell, flags): the whole whitespace-delimited token, less
  the closing brackets, quotes and the ``,`` or ``;`` of an enclosing construct.

Forms read: ``key=v``, ``key = v``, ``key: v``, ``key := v``, ``key => v``, ``"key": "v"``,
``export KEY=v``, ``--key=v``, ``--key v``, ``<key>v</key>``, and Kubernetes' and CI's
``name: KEY`` followed by ``value: v``.

A bare (unquoted) value that does not end its field (``password = hunter2 is the example``) is
read as prose unless it is written shell-style (``PGPASSWORD=s3cret psql``) or looks like a
secret on its own (8+ characters mixing letters with digits or symbols).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import re2

from context_ledger.dlp.detectors.base import Finding

MAX_VALUE = 500

# Values that name a secret instead of holding one: environment and template references,
# placeholders, masks, elided examples (``ctxl_...``), ARNs and vault paths, null-ish literals,
# type names, and code (calls, subscripts, attribute access).
REFERENCE = re.compile(
    r"""\$\{?[A-Za-z_][A-Za-z0-9_.:-]*\}?|\$\{\{.*\}\}|\{\{.*\}\}|\$\(.*\)|%[A-Za-z_]\w*%
    |<[^<>]*>|%\([^)]*\)s|\{[A-Za-z_.]*\}|\#\{.*\}|!(?:Ref|Sub|GetAtt|ImportValue)\b.*
    |\*+|x+|X+|\.\.\.|\S*\.\.\.|\[REDACTED:[a-z0-9_]+\]|arn:.*
    |[a-z][a-z0-9+.\-]*://[^@\s]*|(?:vault|ssm|secretsmanager|keyvault|op|sops):.*
    |[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:\(.*\)|\[.*\])
    |[A-Za-z_$][A-Za-z_$]*(?:\.[A-Za-z_$][A-Za-z_$]*)+
    |(?i:none|null|nil|true|false|undefined|str|string|bytes|int|secretstr|required|optional)""",
    re.VERBOSE,
)
# Documentation placeholders (docs/decisions.md, "placeholders"): published, so not secrets.
PLACEHOLDER = re.compile(
    r"(?i)change[_-]?(?:me|it|this)|replace[_-]?(?:me|this)|placeholder|dummy|redacted|masked"
    r"|(?:your|my)[_-]?[a-z_-]*(?:here)?|[a-z_-]*[_-]here|todo|tbd|fixme|example|sample"
)
# A bare value naming another variable: ``password=db_password``, ``token: authToken``.
_NAMES_A_SECRET = re.compile(r"(?i)pass|pwd|secret|token|key|cred|auth")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z_$.]*")

_QUOTES = "'\"`"
_CLOSERS = {")": "(", "]": "[", "}": "{", ">": "<"}
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_FIELD_END = frozenset("#,;&|)]}'\"`")
_BARE_END = {";": re.compile(r"[^\s;]*"), "&": re.compile(r"[^\s&#]*"), "": re.compile(r"\S*")}


@dataclass(frozen=True)
class Value:
    """An assigned value: ``text[start:end]``, how it was written and whether it ends its field."""

    start: int
    end: int
    quoted: bool
    ends_field: bool

    def of(self, text: str) -> str:
        return text[self.start : self.end]


def key_start(text: str, end: int) -> int:
    """Where the key token ending at ``end`` starts (letters, digits, ``_``, ``.``, ``-``)."""
    start = end
    floor = max(0, end - 128)
    while start > floor and text[start - 1] in _KEY_CHARS:
        start -= 1
    return start


def delimiter(text: str, start: int) -> str:
    """The field separator of the list the key at ``start`` is in: ``;``, ``&`` or none."""
    before = start - 1
    while before >= 0 and text[before] in " \t":
        before -= 1
    if before < 0:
        return ""
    char = text[before]
    if char == ";":
        return ";"
    if char in "?&":
        return "&"
    return ""


def read_value(text: str, position: int, separator: str) -> Value | None:
    """The value starting at ``position`` (blanks skipped), delimited as the module says."""
    length = len(text)
    while position < length and text[position] in " \t":
        position += 1
    if position >= length:
        return None
    quote = text[position]
    if quote in _QUOTES:
        close = _closing_quote(text, position + 1, quote)
        if close is not None:
            return Value(position + 1, close, quoted=True, ends_field=True)
        position += 1
    end = _BARE_END[separator].match(text, position, min(length, position + MAX_VALUE)).end()  # type: ignore[union-attr]
    end = max(end, _reference_end(text, position))
    end = _strip_closers(text, position, end)
    if end <= position:
        return None
    return Value(position, end, quoted=False, ends_field=_ends_field(text, end))


# Openers of references that may hold blanks (``$(cat /run/secrets/db)``, ``<your password>``).
_OPENERS = (("$(", ")"), ("${{", "}}"), ("${", "}"), ("{{", "}}"), ("<", ">"), ("%(", ")"))


def _reference_end(text: str, start: int) -> int:
    """The end of a reference opened at ``start`` and closed on the same line, else ``start``."""
    for opener, closer in _OPENERS:
        if text.startswith(opener, start):
            line_end = text.find("\n", start)
            close = text.find(closer, start + len(opener), None if line_end < 0 else line_end)
            return start if close < 0 else close + len(closer)
    return start


def _closing_quote(text: str, start: int, quote: str) -> int | None:
    index = start
    limit = min(len(text), start + MAX_VALUE)
    while index < limit:
        char = text[index]
        if char == quote:
            return index if index > start else None
        if char in "\r\n":
            return None
        index += 2 if char == "\\" else 1
    return None


def _strip_closers(text: str, start: int, end: int) -> int:
    """Drop what closes an enclosing construct: unbalanced brackets and quotes, a final ``,;``."""
    while end > start:
        char = text[end - 1]
        value = text[start:end]
        unbalanced = (char in _CLOSERS and value.count(_CLOSERS[char]) < value.count(char)) or (
            char in _QUOTES and value.count(char) % 2 == 1
        )
        if not (char in ",;" or unbalanced):
            break
        end -= 1
    return end


def _ends_field(text: str, end: int) -> bool:
    while end < len(text) and text[end] in " \t":
        end += 1
    return end >= len(text) or text[end] in "\r\n" or text[end] in _FIELD_END


def is_reference(value: str, *, quoted: bool) -> bool:
    """Whether ``value`` names, templates or stands in for a secret instead of being one."""
    if REFERENCE.fullmatch(value) or PLACEHOLDER.fullmatch(value):
        return True
    # An unquoted identifier without digits naming a secret is a variable: ``password=db_pass``.
    return (
        not quoted
        and _IDENTIFIER.fullmatch(value) is not None
        and _NAMES_A_SECRET.search(value) is not None
    )


def looks_secret(value: str) -> bool:
    """8+ characters mixing letters with digits or symbols: a secret even amid prose."""
    return (
        len(value) >= 8
        and any(c.isalpha() for c in value)
        and any(not c.isalpha() for c in value)
        and not value.isdigit()
    )


# Key names, not secrets (S105). Short names must start a word of the key (``db_pwd``,
# ``dbPwd``, ``--pw``); long ones may end any key (``DBPASSWORD``).
PASSWORD_KEYS = ("password", "passwd", "passphrase", "pwd", "pass", "pw")
SECRET_KEYS = (
    "secret", "token", "apikey", "api_key", "api-key", "accesskey", "access_key", "access-key",
    "privatekey", "private_key", "private-key", "signingkey", "signing_key", "encryptionkey",
    "encryption_key", "credential", "credentials", "accountkey", "account_key",
    "sharedaccesskey", "sharedaccesssignature", "sig", "signature", "auth", "authkey",
    "auth_key", "clientsecret", "client_secret", "masterkey", "master_key", "secretkey",
    "secret_key", "webhooksecret", "bearer", "sessionkey", "session_key", "license_key",
    "licensekey", "sas", "sastoken", "sas_token", "dsn",
)  # fmt: skip
_SHORT = 4
_KINDS = dict.fromkeys(PASSWORD_KEYS, "password") | dict.fromkeys(SECRET_KEYS, "secret")
_NAMES = sorted(_KINDS, key=len, reverse=True)
_SEPARATOR = r"""['"]?[ \t]*(?::=|=>|[:=])|>|[ \t]+"""
_KEY_PATTERN = re.compile(
    r"(?i)(?P<key>" + "|".join(re.escape(n) for n in _NAMES) + r")(?P<sep>" + _SEPARATOR + ")"
)
_ENV_ITEM = re.compile(
    r"""(?im)^[ \t]*-?[ \t]*name:[ \t]*['"]?(?P<name>[A-Za-z_][\w.\-]*)['"]?[ \t]*\r?\n"""
    r"""[ \t]*value:"""
)


def key_kind(key: str) -> str | None:
    """``password`` or ``secret`` when the key token names one (by its last word), else None."""
    lower = key.lower()
    for name in _NAMES:
        if lower.endswith(name):
            start = len(key) - len(name)
            if len(name) > _SHORT or start == 0 or _word_starts(key, start):
                return _KINDS[name]
    return None


def _word_starts(key: str, index: int) -> bool:
    before = key[index - 1]
    return not before.isalnum() or (before.islower() and key[index].isupper())


class NamedKeyDetector:
    """Values assigned to keys that name a password or a secret, whole (module docstring).

    Password values need 3+ characters; secret values 8+ with a digit (``token: bearer`` and
    ``secret: my-app-secret`` name things). Neither may be a reference or placeholder.
    """

    kinds = ("password", "secret")
    gate = (
        r"(?i)(?:"
        + "|".join(re2.escape(n) for n in _NAMES)
        + ")(?:"
        + _SEPARATOR
        + r""")|name:[ \t]*['"]?[\w.\-]+['"]?[ \t]*\r?\n[ \t]*value:"""
    )

    def __init__(self) -> None:
        options = re2.Options()
        options.log_errors = False
        self._anchor = re2.compile(self.gate, options)

    def find(self, text: str) -> Iterator[Finding]:
        resume = 0
        for anchor in self._anchor.finditer(text):
            if anchor.start() < resume:
                continue
            match = _KEY_PATTERN.match(text, anchor.start())
            if match is None:
                continue
            finding = self._assigned(text, match)
            if finding is not None:
                resume = finding.end
                yield finding
        if "name:" in text:
            yield from self._env_items(text)

    def _assigned(self, text: str, match: re.Match[str]) -> Finding | None:
        start = key_start(text, match.end("key"))
        key = text[start : match.end("key")]
        kind = key_kind(key)
        if kind is None:
            return None
        separator = match.group("sep")
        flag = text.startswith("-", start) or key.startswith("-")
        blank = separator.strip() == ""
        if separator == ">" and not text.endswith("<", 0, start):
            return None
        if blank and not (flag or _declares(text, start)):
            return None
        value = read_value(text, match.end(), delimiter(text, start))
        if value is None:
            return None
        literal = value.of(text)
        if separator == ">":
            literal = literal.split("</", 1)[0]
            value = Value(value.start, value.start + len(literal), quoted=True, ends_field=True)
        if not _is_literal(literal, kind, quoted=value.quoted):
            return None
        # Shell style, ``PGPASSWORD=s3cret psql``: glued to its ``=``, the value ends at a blank.
        glued = separator == "=" and value.start == match.end()
        if not (value.ends_field or flag or blank or glued or looks_secret(literal)):
            return None
        return Finding(value.start, value.end, kind)

    def _env_items(self, text: str) -> Iterator[Finding]:
        for item in _ENV_ITEM.finditer(text):
            kind = key_kind(item.group("name"))
            if kind is None:
                continue
            value = read_value(text, item.end(), "")
            if value is not None and _is_literal(value.of(text), kind, quoted=value.quoted):
                yield Finding(value.start, value.end, kind)


_DECLARATION = re.compile(r"[ \t]*(?i:env|arg|set|setx)[ \t]+")


def _declares(text: str, start: int) -> bool:
    """``ENV KEY value`` / ``ARG`` (Dockerfile) and ``set KEY value``: a blank separates."""
    line = text.rfind("\n", 0, start) + 1
    return _DECLARATION.fullmatch(text, line, start) is not None


def _is_literal(value: str, kind: str, *, quoted: bool) -> bool:
    if is_reference(value, quoted=quoted):
        return False
    if kind == "password":
        return len(value) >= 3
    return len(value) >= 8 and any(c.isdigit() for c in value) and not value.isdigit()
