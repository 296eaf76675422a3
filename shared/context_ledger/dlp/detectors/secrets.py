"""Detectors for credentials: cloud keys, private keys, JWTs, provider tokens, passwords.

No pattern nests quantifiers, so no input makes them backtrack badly; each runs only on text its
gate (an RE2 pattern: the marker or the pattern's core) matched, see ``Detector``.
"""

from __future__ import annotations

import re

from context_ledger.dlp.detectors.base import RegexDetector, Validator

_START = r"(?<![A-Za-z0-9_\-])"
_END = r"(?![A-Za-z0-9_\-])"
_AWS_ACCESS_KEY = r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|AROA|APKA)[A-Z0-9]{16}"

# Values that name a secret instead of holding one: environment and template references,
# placeholders, masks, elided examples (``ctxl_...``), ARNs, null-ish literals and type names.
_REFERENCE = re.compile(
    r"""\$\{?[A-Za-z_][A-Za-z0-9_.:-]*\}?|\{\{.*\}\}|<[^<>]*>|%\([^)]*\)s|\{[A-Za-z_.]*\}
    |\*+|x+|X+|\S*\.\.\.|\[REDACTED:[a-z0-9_]+\]|arn:.*
    |(?i:none|null|nil|true|false|undefined|str|string|bytes|int|secretstr|required|optional)""",
    re.VERBOSE,
)
# A bare (unquoted) value naming another variable: ``password=db_password``, ``token=auth_token``.
_NAMES_A_SECRET = re.compile(r"(?i)pass(?:word|wd)|secret|token")


def _value(match: re.Match[str]) -> str:
    return match.group("quoted") or match.group("bare") or match.group("inline") or ""


def _literal_value(match: re.Match[str]) -> bool:
    """Whether an assigned value is a literal rather than a reference to a secret."""
    bare = match.group("bare") or match.group("inline")
    if bare and _NAMES_A_SECRET.search(bare):
        return False
    value = _value(match)
    return len(value) >= 3 and not _REFERENCE.fullmatch(value)


def _literal_secret(match: re.Match[str]) -> bool:
    """Generic keys also name harmless values (``token: "bearer"``): want 8+ chars, a digit."""
    value = _value(match)
    return (
        _literal_value(match)
        and len(value) >= 8
        and any(c.isdigit() for c in value)
        and not value.isdigit()
    )


def _mixed_case_and_digits(match: re.Match[str]) -> bool:
    """Generic prefixes (``sk-``) also start words; real keys mix digits, upper and lower case."""
    value = match.group(0)
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )


def _reference_free(match: re.Match[str]) -> bool:
    return not _REFERENCE.fullmatch(match.group("value"))


def _assignment(keys: str) -> re.Pattern[str]:
    """``key = value`` in code, config, env files, JSON, YAML, query and connection strings.

    The key must end right before the separator (``password_hash = x`` is not a password). A
    bare value must be all that is left of the field (end of line, ``;``, ``&``, ``,`` or a
    comment), which skips calls, subscripts and prose (``password = get_pw()``), unless it is
    written shell-style, glued to an ``=`` and followed by a blank (``PGPASSWORD=s3cret psql``,
    ``why does DB_PASSWORD=hunter22 fail``): the ``inline`` group.
    """
    return re.compile(
        r"(?i:" + keys + ")" + _SEPARATOR + r"[ \t]*"
        r"""(?:(?P<q>['"`])(?P<quoted>[^'"`\r\n]{1,200})(?P=q)"""
        r"""|(?P<bare>[^\s'"`,;&()\[\]{}<>]{1,200}+)(?=[ \t]*(?:[;&,#\r\n]|$))"""
        r"""|(?<==)(?P<inline>[^\s'"`,;&()\[\]{}<>]{1,200}+)(?=[ \t]))""",
        re.MULTILINE,
    )


_ASSIGNED = ("quoted", "bare", "inline")
_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
_SEPARATOR = r"""['"]?[ \t]*(?::=|=>|[:=])"""
# Key names, not secrets (S105).
PASSWORD_KEYS = r"password|passwd|passphrase|pwd"  # noqa: S105
SECRET_KEYS = (
    r"secret|secret[_-]?key|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key"  # noqa: S105
    r"|signing[_-]?key|encryption[_-]?key|credentials?"
)


def _token(kind: str, pattern: str, gate: str, validate: Validator | None = None) -> RegexDetector:
    """A provider token: a fixed prefix and its alphabet, standing alone."""
    return RegexDetector(kind, re.compile(_START + pattern + _END), gate, validate=validate)


SECRET_DETECTORS: tuple[RegexDetector, ...] = (
    # A whole PEM block; without its END (cut by a chunk boundary) the BEGIN line and the body
    # lines after it; without its BEGIN the body lines before the END line.
    RegexDetector(
        "private_key",
        re.compile(
            _PEM_BEGIN
            + r"[\s\S]*?"
            + _PEM_END
            + "|"
            + _PEM_BEGIN
            + r"(?:\r?\n(?:[A-Za-z0-9+/=]{1,100}|[A-Za-z-]{1,30}: [^\r\n]*)?)*"
            + r"|(?:^[A-Za-z0-9+/=]{16,100}\r?\n)+"
            + _PEM_END,
            re.MULTILINE,
        ),
        "PRIVATE KEY",
    ),
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
    ),
    _token("jwt", r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", "eyJ"),
    _token(
        "github_token",
        r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{50,255})",
        "gh[pousr]_|github_pat_",
    ),
    _token("gitlab_token", r"glpat-[A-Za-z0-9_-]{20,64}", "glpat-"),
    _token("slack_token", r"xox[abposr]-[A-Za-z0-9-]{10,255}", "xox[abposr]-"),
    RegexDetector(
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+"),
        r"hooks\.slack\.com/services/",
    ),
    _token(
        "stripe_key", r"(?:(?:sk|rk|pk)_live|(?:sk|rk)_test)_[A-Za-z0-9]{16,255}", "_(?:live|test)_"
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
    RegexDetector(
        "password_in_url",
        re.compile(r"://[^\s:/?#@'\"]{0,128}:(?P<value>[^\s/?#@'\"]{1,200})@"),
        r"://[^\s:/?#@]*:[^\s/?#@]+@",
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
    RegexDetector(
        "password",
        _assignment(PASSWORD_KEYS),
        r"(?i)(?:" + PASSWORD_KEYS + ")" + _SEPARATOR,
        groups=_ASSIGNED,
        validate=_literal_value,
        anchored=True,
    ),
    RegexDetector(
        "secret",
        _assignment(SECRET_KEYS),
        r"(?i)(?:" + SECRET_KEYS + ")" + _SEPARATOR,
        groups=_ASSIGNED,
        validate=_literal_secret,
        anchored=True,
    ),
)
