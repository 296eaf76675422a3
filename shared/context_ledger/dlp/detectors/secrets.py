"""Detectors for credentials: cloud keys, private keys, JWTs, provider tokens, passwords.

No pattern nests quantifiers, so no input makes them backtrack badly; each runs only on text its
gate (an RE2 pattern: the marker or the pattern's core) matched, see ``Detector``.
"""

from __future__ import annotations

import re

from context_ledger.dlp.detectors.assignment import REFERENCE, NamedKeyDetector
from context_ledger.dlp.detectors.base import Detector, RegexDetector, Validator

_START = r"(?<![A-Za-z0-9_\-])"
_END = r"(?![A-Za-z0-9_\-])"
_AWS_ACCESS_KEY = r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|AROA|APKA)[A-Z0-9]{16}"


def _mixed_case_and_digits(match: re.Match[str]) -> bool:
    """Generic prefixes (``sk-``) also start words; real keys mix digits, upper and lower case."""
    value = match.group(0)
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )


def _reference_free(match: re.Match[str]) -> bool:
    return not REFERENCE.fullmatch(match.group("value"))


def _token_like(match: re.Match[str]) -> bool:
    """A bearer credential outside a header: a reference-free value holding a digit."""
    value = match.group("value")
    return _reference_free(match) and any(c.isdigit() for c in value)


_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----"
_SEPARATOR = r"""['"]?[ \t]*(?::=|=>|[:=])"""


def _token(kind: str, pattern: str, gate: str, validate: Validator | None = None) -> RegexDetector:
    """A provider token: a fixed prefix and its alphabet, standing alone."""
    return RegexDetector(kind, re.compile(_START + pattern + _END), gate, validate=validate)


SECRET_DETECTORS: tuple[Detector, ...] = (
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
    # The login's password runs to the last "@" before the host: a raw "@" in it is the password's.
    RegexDetector(
        "password_in_url",
        re.compile(
            r"://[^\s:/?#@'\"]{0,128}:(?P<value>[^\s/?#'\"]{1,200}?)"
            r"@(?=[A-Za-z0-9.\-\[\]]+(?::\d+)?(?:[/?#'\",;)\s]|$))(?![^\s@/?#]*@)",
        ),
        r"://[^\s:/?#@]*:[^\s/?#]+@",
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
        re.compile(r"(?<![A-Za-z])(?i:bearer)[ \t]+(?P<value>[A-Za-z0-9._~+/\-]{16,}=*)"),
        r"(?i)bearer[ \t]+[A-Za-z0-9._~+/\-]{16}",
        groups=("value",),
        validate=_token_like,
    ),
    NamedKeyDetector(),
)
