"""Detectors for credentials: cloud keys, private keys, JWTs, provider tokens, passwords.

No pattern nests quantifiers, so no input makes them backtrack badly; each runs only on text its
gate (an RE2 pattern: the marker or the pattern's core) matched, see ``Detector``.
"""

from __future__ import annotations

import bisect
import re
import string
from collections.abc import Iterator

from context_ledger.dlp.detectors.assignment import (
    PLACEHOLDER,
    REFERENCE,
    NamedKeyDetector,
    looks_secret,
)
from context_ledger.dlp.detectors.base import Detector, Finding, RegexDetector, Validator
from context_ledger.dlp.detectors.prose import PasswordInProseDetector, chosen_password
from context_ledger.dlp.detectors.runs import decode
from context_ledger.dlp.detectors.tables import CsvColumnDetector, MarkdownTableDetector

_TOKEN_NEIGHBOUR = re.compile(r"[A-Za-z0-9_\-]")
_END = r"(?![A-Za-z0-9_\-])"
_AWS_ACCESS_KEY = r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|AROA|APKA)[A-Z0-9]{16}"


def _mixes_case_and_digits(value: str) -> bool:
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )


def _mixed_case_and_digits(match: re.Match[str]) -> bool:
    """Generic prefixes (``sk-``) also start words; real keys mix digits, upper and lower case."""
    return _mixes_case_and_digits(match.group(0))


def _varied(match: re.Match[str]) -> bool:
    """Not a mask or placeholder (``xxxx...``, ``0000...``): a key uses many characters."""
    return len(set(match.group("value"))) >= 8


def _user_and_password(match: re.Match[str]) -> bool:
    decoded = decode(match.group("value"))
    return decoded is not None and ":" in decoded.strip(":")


def _has_digit(match: re.Match[str]) -> bool:
    return any(c.isdigit() for c in match.group(0))


def _reference_free(match: re.Match[str]) -> bool:
    return not REFERENCE.fullmatch(match.group("value"))


def _url_password(match: re.Match[str]) -> bool:
    value = match.group("value")
    return _reference_free(match) and not re.match(r"\d{1,5}(?:[/?#;]|$)", value)


_ARGUMENT = (
    r"""(?:'(?P<single>[^'\n]{1,200})'|"(?P<double>[^"\n]{1,200})"|(?P<bare>[^\s'"]{1,200}))"""
)


def _command_password(match: re.Match[str]) -> bool:
    """A command word that starts a word, and an argument that is no reference."""
    start = match.start()
    if start and (match.string[start - 1].isalnum() or match.string[start - 1] in "_-"):
        return False
    value = match.group("single") or match.group("double") or match.group("bare") or ""
    return len(value) >= 3 and not REFERENCE.fullmatch(value)


def _paired_password(match: re.Match[str]) -> bool:
    """The password of a ``login: user / password`` pair: one that looks secret on its own
    (8+ characters mixing letters with digits or symbols), so ``login: admin / password`` and
    ``login: see docs/setup`` are prose. A URL's ``host:port/path`` is no pair."""
    value = match.group("value").rstrip(".,;)")
    return (
        looks_secret(value)
        and not REFERENCE.fullmatch(value)
        and not PLACEHOLDER.fullmatch(value)
        and not match.group("user").isdigit()
        and "/" not in value
    )


def _commented_login(match: re.Match[str]) -> bool:
    """A ``user:password`` pair whose password is shaped like a chosen one, or mixes upper
    case, lower case and digits: what else an HTML comment holds so (``wp:core/image``,
    ``toc:start``, ``image:hero-banner-2x``) is a directive, a path or a name."""
    value = match.group("value")
    return _paired_password(match) and (chosen_password(value) or _mixes_case_and_digits(value))


def _token_like(match: re.Match[str]) -> bool:
    """A bearer credential outside a header: a reference-free value holding a digit."""
    value = match.group("value")
    return _reference_free(match) and any(c.isdigit() for c in value)


_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
# A PEM line break as written, or escaped in a JSON or HCL string (a tfstate holds its keys so,
# as one line of ~1,700 characters that the chunker cuts wherever the line is too long).
_PEM_BREAK = r"(?:\r?\n|(?:\\r)?\\n)"
_PEM_LINE = r"[A-Za-z0-9+/=]{1,100}"
_SEPARATOR = r"""['"]?[ \t]*(?::=|=>|[:=])"""


def _token(kind: str, pattern: str, gate: str, validate: Validator | None = None) -> RegexDetector:
    """A provider token: a fixed prefix and its alphabet, standing alone.

    The start is checked on the match, not by a leading lookbehind: a pattern that opens with
    its literal prefix lets the engine skip to candidates, one that opens with a lookbehind is
    tried at every position (5-10x slower on a text where the gate opened).
    """

    def standalone(match: re.Match[str]) -> bool:
        start = match.start()
        if start and _TOKEN_NEIGHBOUR.match(match.string, start - 1):
            return False
        return validate is None or validate(match)

    return RegexDetector(kind, re.compile(pattern + _END), gate, validate=standalone)


#: What a key's body is written with: its alphabet, line breaks as written, and the backslashes
#: of breaks and slashes escaped in a string (``\n``, ``\/`` as PHP writes it, ``\\n`` in a
#: JSON string inside a JSON string).
_KEY_BODY = frozenset(string.ascii_letters + string.digits + "+/=\\\r\n")
_ARMOUR = re.compile(r"-----(BEGIN|END) ([A-Z0-9 ]{1,40})-----")
_PUBLIC_ARMOUR = re.compile(r"CERTIFICATE|PUBLIC KEY|X509 CRL")


def _beside_public_armour(armours: list[re.Match[str]], start: int, end: int) -> bool:
    """Whether the nearest of ``armours`` (the text's, in order) before ``start`` opens, or the
    nearest after ``end`` closes, a certificate or public key: a body between them is public
    material, however cut."""
    at = bisect.bisect_left([armour.start() for armour in armours], start)
    before = armours[at - 1] if at else None
    if before and before.group(1) == "BEGIN" and _PUBLIC_ARMOUR.search(before.group(2)):
        return True
    after = next((armour for armour in armours[at:] if armour.start() >= end), None)
    return bool(after and after.group(1) == "END" and _PUBLIC_ARMOUR.search(after.group(2)))


class KeyFragmentDetector:
    r"""A private key's BEGIN without its END, or END without its BEGIN, with all of the body
    the text holds on that side, however it is written.

    A chunk boundary cuts a key anywhere: in a tfstate's or a service account's JSON string
    (breaks escaped as ``\n``, slashes as ``\/``), a key written on one line with no breaks at
    all, a key inside a JSON string inside a JSON string (``\\n``). The private-key pattern's
    own partial forms read line by line and stop at what they do not know; here the body is
    walked from the marker over its alphabet, breaks and escapes, once per marker (linear
    whatever the text). After a BEGIN, spaces go with it too (a key pasted with its lines
    joined by spaces): what follows a BEGIN whose END is not in the text is the key.
    """

    kinds = ("private_key",)
    gate = "PRIVATE KEY"
    _begin = re.compile(_PEM_BEGIN)
    _end = re.compile(_PEM_END)
    _after_begin = _KEY_BODY | frozenset(" \t")

    def find(self, text: str) -> Iterator[Finding]:
        ends = list(self._end.finditer(text))
        begins = list(self._begin.finditer(text))
        for begin in begins:
            if not ends or ends[-1].start() < begin.end():
                stop = begin.end()
                while stop < len(text) and text[stop] in self._after_begin:
                    stop += 1
                yield Finding(begin.start(), stop, "private_key")
        for end in ends:
            if not begins or begins[0].end() > end.start():
                start = end.start()
                while start > 0 and text[start - 1] in _KEY_BODY:
                    start -= 1
                yield Finding(start, end.end(), "private_key")


class EscapedKeyBodyDetector:
    r"""The body of a key whose lines are escaped in a string, where a chunk holds neither end.

    A tfstate's 4,096-bit key is one JSON line of ~3,200 characters; the chunker cuts it twice,
    and the middle chunk holds lines of the body without the BEGIN or END that the private-key
    pattern starts from. The entropy detector takes most of those lines but not the short pieces
    the cuts leave at either end. Two or more full-width lines (RFC 7468 writes 64 characters,
    OpenSSH 70, MIME 76; a slash may be escaped, ``\/``) between escaped breaks (``\n``, or
    ``\\n`` in a JSON string inside a JSON string) are a body; the partial lines before and
    after them go with it. A body beside a certificate's or public key's armour stays readable.
    """

    kinds = ("private_key",)
    gate = r"[A-Za-z0-9+/]{4}(?:\\+r)?\\+n[A-Za-z0-9+/\\]{4}"
    _lines = re.compile(r"(?:(?:\\+r)?\\+n(?:[A-Za-z0-9+]|\\*/){60,76}(?![A-Za-z0-9+/])){2,}")

    def find(self, text: str) -> Iterator[Finding]:
        armours: list[re.Match[str]] | None = None
        for match in self._lines.finditer(text):
            start, end = match.span()
            if armours is None:  # read once, and only for a text that holds a body
                armours = list(_ARMOUR.finditer(text))
            if _beside_public_armour(armours, start, end):
                continue
            floor = max(0, start - 100)
            while start > floor and text[start - 1] in _KEY_BODY:
                start -= 1
            ceiling = min(len(text), end + 100)
            while end < ceiling and text[end] in _KEY_BODY:
                end += 1
            yield Finding(start, end, "private_key")


class SessionCookieDetector:
    """A session cookie's value, in a ``Cookie:`` or ``Set-Cookie:`` header or a tool's
    ``--cookie``: whoever holds it is logged in as its user (``Cookie: session=8f14e45f...``,
    ``JSESSIONID``, ``PHPSESSID``, ``connect.sid``, ``_app_session``). Other cookies of the list
    (``theme=dark``) stay, and so does a cleared one (``session=deleted``): a value counts with
    8+ characters holding a digit, as an assigned secret's does."""

    kinds = ("secret",)
    gate = r"(?i)cookie"
    _list = re.compile(r"""(?i)cookie['"]?(?:[ \t]*[:=][ \t]*|[ \t]+)['"]?""")
    _pair = re.compile(r"""[ \t]*(?P<name>[^\s;=,'"]{1,64})=(?P<value>[^\s;,'"`\\]{1,4096})""")
    _session = re.compile(r"(?i)[\w.\-]*(?:sess(?:ion)?(?:[_.\-]?id)?|sid)")

    def find(self, text: str) -> Iterator[Finding]:
        for cookies in self._list.finditer(text):
            position = cookies.end()
            while pair := self._pair.match(text, position):
                value = pair.group("value")
                if (
                    self._session.fullmatch(pair.group("name"))
                    and len(value) >= 8
                    and any(c.isdigit() for c in value)
                    and not REFERENCE.fullmatch(value)
                ):
                    yield Finding(*pair.span("value"), "secret")
                position = pair.end()
                if not text.startswith(";", position):
                    break
                position += 1


# A private key's DER written as hex: a SEQUENCE opening with the version INTEGER 0 or 1
# (PKCS#1, PKCS#8, SEC1 and OpenSSL's traditional forms all do; a certificate, a public key
# and a signature open otherwise), then an INTEGER, OCTET STRING or SEQUENCE. Hex has 4 bits
# a character, under the entropy detector's bar, so the structure is what gives it away.
_HEX_DER_KEY = re.compile(
    r"(?i)30(?:82[0-9a-f]{4}|81[0-9a-f]{2}|[0-7][0-9a-f])02010[01](?:02|04|30)[0-9a-f]{60,}"
)


def _standalone_hex(match: re.Match[str]) -> bool:
    """Not the inside of a longer hex string (a digest, a hex dump's middle)."""
    start = match.start()
    return not (start and match.string[start - 1] in "0123456789abcdefABCDEF")


SECRET_DETECTORS: tuple[Detector, ...] = (
    # A whole PEM block; without its END (cut by a chunk boundary) the BEGIN line and the body
    # lines after it, headers (``Proc-Type: 4,ENCRYPTED``) included. An END without its BEGIN,
    # and a body written otherwise, is KeyFragmentDetector's.
    RegexDetector(
        "private_key",
        re.compile(
            _PEM_BEGIN
            + r"[\s\S]*?"
            + _PEM_END
            # In a JSON string (a tfstate), the escaped line break that ends the block.
            + r"(?:\\n)?"
            + "|"
            + _PEM_BEGIN
            + r"(?:"
            + _PEM_BREAK
            + r"(?:"
            + _PEM_LINE
            + r"|[A-Za-z-]{1,30}: [^\r\n\\]*)?)*",
        ),
        "PRIVATE KEY",
    ),
    KeyFragmentDetector(),
    RegexDetector("private_key", _HEX_DER_KEY, "02010[01]", validate=_standalone_hex),
    EscapedKeyBodyDetector(),
    RegexDetector(
        "aws_access_key",
        re.compile(r"(?<![A-Z0-9])" + _AWS_ACCESS_KEY + r"(?![A-Za-z0-9])"),
        "AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|AROA|APKA",
    ),
    RegexDetector(
        "aws_secret_key",
        re.compile(
            r"(?i:secret_?access_?key|aws_?secret(?:_?access)?_?key)"
            + _SEPARATOR
            + r"""[ \t]*['"]?(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"""
        ),
        r"(?i)secret_?access_?key|aws_?secret",
        groups=("value",),
        validate=_varied,
    ),
    _token("jwt", r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", "eyJ"),
    _token(
        "github_token",
        r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{50,255})",
        "gh[pousr]_|github_pat_",
    ),
    _token("gitlab_token", r"glpat-[A-Za-z0-9_-]{20,64}", "glpat-"),
    _token("slack_token", r"xox[abposr]-[A-Za-z0-9-]{10,255}", "xox[abposr]-"),
    # Slack app-level tokens: xapp-<version>-<app id>-<number>-<hex>.
    _token("slack_token", r"xapp-\d-[A-Z0-9]{8,}-\d{6,}-[A-Za-z0-9]{32,}", "xapp-"),
    # Shopify access, custom-app, private-app and shared-secret tokens.
    _token("shopify_token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", "shp(?:at|ca|pa|ss)_"),
    # DigitalOcean personal, OAuth and refresh tokens.
    _token("digitalocean_token", r"do[por]_v1_[a-f0-9]{64}", "do[por]_v1_"),
    RegexDetector(
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+"),
        r"hooks\.slack\.com/services/",
    ),
    # A Discord webhook URL is its own credential: whoever has it posts to the channel.
    RegexDetector(
        "discord_webhook",
        re.compile(
            r"https://(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api/webhooks/\d{15,25}/"
            r"[A-Za-z0-9_-]{60,80}"
        ),
        r"discord(?:app)?\.com/api/webhooks/",
    ),
    _token(
        "stripe_key", r"(?:(?:sk|rk|pk)_live|(?:sk|rk)_test)_[A-Za-z0-9]{16,255}", "_(?:live|test)_"
    ),
    # SonarQube user, project and global analysis tokens; Mailgun's key-<32 hex>.
    _token("sonarqube_token", r"sq[upa]_[0-9a-f]{40}", "sq[upa]_"),
    _token("mailgun_key", r"key-[0-9a-f]{32}", "key-"),
    # The <vendor>_live_ / <vendor>_test_ convention many payment and API vendors follow.
    _token(
        "api_key",
        r"[a-z]{2,10}_(?:live|test|prod)_[A-Za-z0-9]{16,255}",
        "_(?:live|test|prod)_",
        _has_digit,
    ),
    _token("google_api_key", r"AIza[A-Za-z0-9_-]{35}", "AIza"),
    _token("anthropic_key", r"sk-ant-[a-z]{2,8}\d{2}-[A-Za-z0-9_-]{32,255}", "sk-ant-"),
    _token(
        "openai_key",
        r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,255}",
        "sk-",
        _mixed_case_and_digits,
    ),
    _token("huggingface_token", r"hf_[A-Za-z0-9]{34,40}", "hf_"),
    _token("npm_token", r"npm_[A-Za-z0-9]{36}", "npm_"),
    _token("pypi_token", r"pypi-AgE[A-Za-z0-9_-]{50,255}", "pypi-AgE"),
    _token("sendgrid_key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", r"SG\."),
    _token("ctxl_api_key", r"ctxl_[A-Za-z0-9_-]{32,64}", "ctxl_"),
    # The login's password runs to the last "@" before the host, whatever it holds (a raw "@",
    # "#", "/", "?", a backslash-escaped quote); only a bare quote or a blank ends the URL. A
    # "password" of digits before a "/" is a port (``http://host:8080/a@b``), not a password.
    RegexDetector(
        "password_in_url",
        re.compile(
            r"://[^\s:/?#@'\"]{0,128}:(?P<value>(?:[^\s'\"\\]|\\.){1,200}?)"
            r"@(?=[A-Za-z0-9.\-\[\]_]+(?::\d+)?(?:[/?#'\",;)\s\\]|$))(?![^\s@/'\"]*@)",
        ),
        r"://[^\s:/?#@]*:[^\s]+@",
        groups=("value",),
        validate=_url_password,
    ),
    # Command lines that take a password as an argument: mysql's glued -p, sqlcmd's -P,
    # redis-cli's -a, sshpass's -p, curl's and wget's user:password.
    # Literal command names first (not a lookbehind or "\b"), so the engine skips to them.
    RegexDetector(
        "password",
        re.compile(
            r"(?:(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb)\b[^\n]*?[ \t]-p"
            r"|(?:sqlcmd|bcp|osql)\b[^\n]*?[ \t]-P[ \t]+"
            r"|redis-cli\b[^\n]*?[ \t](?:-a|--pass)[ \t]+"
            r"|sshpass\b[^\n]*?[ \t]-p[ \t]*"
            r"|(?:curl|wget)\b[^\n]*?[ \t](?:-u|--user)[ \t]*['\"]?[^\s:'\"]{1,64}:)" + _ARGUMENT
        ),
        r"mysql|mysqldump|mysqladmin|mariadb|sqlcmd|bcp|osql|redis-cli|sshpass|curl|wget",
        groups=("single", "double", "bare"),
        validate=_command_password,
    ),
    # Any tool's "-u user -p password" (rabbitmqadmin, mongo, influx...).
    RegexDetector(
        "password",
        re.compile(r"-u[ \t]*[^\s-]\S*[ \t]+-p[ \t]+" + _ARGUMENT),
        r"-u[ \t]*[^\s-]\S*[ \t]+-p[ \t]",
        groups=("single", "double", "bare"),
        validate=_command_password,
    ),
    # A user and password passed to a call: SetBasicAuth("u", "p"), HTTPBasicAuth("u", "p"),
    # requests' auth=("u", "p").
    RegexDetector(
        "password",
        re.compile(
            r"""(?:(?i:basic_?auth)\(|\bauth[ \t]*=[ \t]*[(\[])[ \t]*"""
            r"""(['"])[^'"\n]{1,64}\1[ \t]*,[ \t]*(['"])(?P<value>[^'"\n]{3,200})\2"""
        ),
        r"(?i)basic_?auth\(|auth[ \t]*=[ \t]*[(\[]",
        groups=("value",),
        validate=_reference_free,
    ),
    # HTTP Basic credentials anywhere: "Basic", a blank or a colon, and base64 of
    # "user:password" (``HTTP Basic: dXNl...``, ``basic: ...`` in a config).
    RegexDetector(
        "basic_auth",
        re.compile(
            r"(?<![A-Za-z])(?i:basic)(?:[ \t]*[:=][ \t]*|[ \t]+)"
            r"(?P<value>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])"
        ),
        r"(?i)basic(?:[ \t]*[:=][ \t]*|[ \t]+)[A-Za-z0-9+/]{8}",
        groups=("value",),
        validate=_user_and_password,
    ),
    # A .pgpass line: hostname:port:database:username:password (the port a number or "*").
    RegexDetector(
        "password",
        re.compile(
            r"(?m)^[^\s:#]{1,255}:(?:\d{1,5}|\*):[^\s:]{1,255}:[^\s:]{1,255}:(?P<value>\S{1,200})$"
        ),
        r"(?m)^[^\s:#]+:(?:\d+|\*):[^\s:]+:[^\s:]+:\S+$",
        groups=("value",),
        validate=_reference_free,
    ),
    RegexDetector(
        "auth_header",
        re.compile(
            r"(?i:authorization)['\"]?[ \t]*[:=][ \t]*['\"]?(?i:bearer|basic|token)[ \t]+"
            r"(?P<value>[A-Za-z0-9._~+/-]{8,}=*)"
        ),
        r"(?i)authorization",
        groups=("value",),
        validate=_reference_free,
    ),
    # "Bearer <token>" anywhere (a log line, a curl command, a config value), not only in an
    # Authorization header; the header form above names the kind when both apply.
    RegexDetector(
        "bearer_token",
        re.compile(r"[Bb](?<![A-Za-z][Bb])(?i:earer)[ \t]+(?P<value>[A-Za-z0-9._~+/\-]{16,}=*)"),
        r"(?i)bearer[ \t]+[A-Za-z0-9._~+/\-]{16}",
        groups=("value",),
        validate=_token_like,
    ),
    # A login written as "user / password" after a word saying so, as notes, comments and
    # chat do: ``staging login: deploy / 7undr4z3phyr#91``, ``creds: svc_etl:W1nt3r$65``,
    # ``the admin creds are admin / Adm1n!Creds``; or before it, ``admin/Admin@12345 is the
    # default login``. The punctuation ending a sentence is not the password's.
    RegexDetector(
        "password",
        re.compile(
            r"(?i:\b(?:logins?|log-?on|sign-?in|credentials?|creds))"
            r"(?:[ \t]*[:=-][ \t]*|[ \t]+(?i:is|are|was|were)[ \t]+)"
            r"(?P<user>[\w.@+\-]{1,64})[ \t]*[/:][ \t]*"
            r"(?P<value>[^\s'\"`<>]{2,199}[^\s'\"`<>.,;)])"
        ),
        r"(?i)(?:login|log-?on|sign-?in|cred)",
        groups=("value",),
        validate=_paired_password,
    ),
    RegexDetector(
        "password",
        re.compile(
            r"(?P<user>[\w.@+\-]{1,64})[ \t]*/[ \t]*(?P<value>[^\s'\"`<>/]{3,200})[ \t]+"
            r"(?i:is|are|was|were)[ \t]+(?:(?i:the|our|a|an)[ \t]+)?(?:[\w\-]{1,30}[ \t]+)?"
            r"(?i:logins?|log-?on|sign-?in|credentials?|creds)\b"
        ),
        r"(?i)(?:is|are|was|were)[ \t]+(?:(?:the|our|an?)[ \t]+)?(?:[\w\-]+[ \t]+)?"
        r"(?:login|log-?on|sign-?in|cred)",
        groups=("value",),
        validate=_paired_password,
    ),
    # A login left whole in an HTML comment: ``<!-- admin:AdminHtml#2023 -->``.
    RegexDetector(
        "password",
        re.compile(r"<!--[ \t]*(?P<user>[a-z][\w.\-]{0,31}):(?P<value>[^\s<>]{8,200}?)[ \t]*-->"),
        "<!--",
        groups=("value",),
        validate=_commented_login,
    ),
    NamedKeyDetector(),
    SessionCookieDetector(),
    PasswordInProseDetector(),
    CsvColumnDetector(),
    MarkdownTableDetector(),
)
