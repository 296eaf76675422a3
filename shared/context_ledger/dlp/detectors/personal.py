"""Detectors for personal data: emails, phone numbers, payment cards, IBANs, national ids.

Numbers are where false positives live (versions, dates, ids, timestamps), so every numeric
detector wants a shape that plain numbers rarely have (separators in the right places, a leading
``+``, a known issuer prefix) and, where one exists, a valid check digit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from context_ledger.dlp.detectors.base import Detector, Finding, RegexDetector, Validator
from context_ledger.dlp.detectors.checksums import (
    IBAN_LENGTHS,
    card_brand_known,
    dni_valid,
    iban_valid,
    luhn_valid,
    nir_valid,
    ssn_valid,
)

# Numbers stand alone: not part of a word, version, path, decimal or longer number. The start
# is checked after the first character (``_AFTER_NUMBER_START``: the one before it is not ...),
# not before it: a pattern that opens with a character class lets Python's engine skip ahead
# to candidates, one that opens with a lookbehind is tried at every position (3x slower).
_AFTER_NUMBER_START = r"(?<![\w.+\-/].)"
_NUMBER_END = r"(?![\w\-/]|\.\d)"
_AFTER_WORD_START = r"(?<![A-Za-z0-9].)"

# File extensions that follow ``@`` in asset names (``icon@2x.png``), not top-level domains.
_FILE_EXTENSIONS = frozenset(
    ("png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "js", "mjs", "ts", "tsx", "jsx",
     "css", "scss", "py", "go", "rb", "json", "yaml", "yml", "md", "txt", "html", "pdf", "zip")
)  # fmt: skip
# Top-level domains common enough that an address ending in one is read as ended there when a
# ``-``, ``_`` or digit is glued to it (``bob@acme-corp.com-ext``, ``...com_old``): for any
# other name the glued character more likely continues code (``x@self.weights_1``).
_GLUED_TLDS = frozenset(
    ("com", "org", "net", "edu", "gov", "mil", "int", "io", "co", "ai", "dev", "app", "info",
     "biz", "me", "us", "uk", "de", "fr", "es", "it", "nl", "be", "ch", "at", "se", "no", "dk",
     "fi", "pl", "ie", "eu", "ca", "au", "nz", "jp", "cn", "in", "br", "ru")
)  # fmt: skip
_GLUE = frozenset("-_0123456789")


def _digits(match: re.Match[str]) -> str:
    return "".join(c for c in match.group(0) if c.isdigit())


def _card(match: re.Match[str]) -> bool:
    digits = _digits(match)
    return 13 <= len(digits) <= 19 and card_brand_known(digits) and luhn_valid(digits)


def _international_phone(match: re.Match[str]) -> bool:
    return 8 <= len(_digits(match)) <= 15


def _ssn(match: re.Match[str]) -> bool:
    digits = _digits(match)
    return ssn_valid(digits[:3], digits[3:5], digits[5:])


def _nir(match: re.Match[str]) -> bool:
    return nir_valid(re.sub(r"[ .]", "", match.group(0)))


def _dni(match: re.Match[str]) -> bool:
    return dni_valid(_digits(match), match.group(0)[-1])


def _uk_phone(match: re.Match[str]) -> bool:
    return len(_digits(match)) == 11


def _nino(match: re.Match[str]) -> bool:
    return match.group(0)[:2] not in _NINO_UNUSED_PREFIXES


# Text from a URL's scheme up to its login: ``scheme://`` then no path, query or fragment yet.
_URL_USERINFO = re.compile(r"://[^\s/?#]*$")
_MACHINE_DOMAINS = (".gserviceaccount.com",)
_MESSAGE_ID_HEADER = re.compile(r"(?i)(?:message-id|in-reply-to|references|content-id)[ \t]*:")
_NINO_UNUSED_PREFIXES = frozenset({"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"})


def _numeric(
    kind: str, first: str, rest: str, gate: str, validate: Validator | None = None
) -> RegexDetector:
    """A standalone number: ``first`` is its first character (a class), ``rest`` the others."""
    return RegexDetector(
        kind,
        re.compile(first + _AFTER_NUMBER_START + rest + _NUMBER_END),
        gate,
        validate=validate,
    )


def _word(kind: str, first: str, rest: str, gate: str, validate: Validator) -> RegexDetector:
    """A standalone alphanumeric word, split like ``_numeric``'s pattern."""
    return RegexDetector(
        kind,
        re.compile(first + _AFTER_WORD_START + rest + r"(?![A-Za-z0-9])"),
        gate,
        validate=validate,
    )


class EmailDetector:
    """Emails, found from their ``@``: the text is searched for ``@`` (fast), never word by word.

    A file named after an address (``alice@example.org.md``) holds one, and so does a name an
    address is glued into by ``-``, ``_`` or a digit (``bob@acme-corp.com-ext``,
    ``notes/bob@acme-corp.com_handover.md``) when its domain ends in a common top-level domain
    (``_GLUED_TLDS``). Not emails: ``user@host``
    as a URL's login (``ssh://git@host``, ``https://u:p@host``; an
    address in a URL's path or query still is one), ``git@host``, asset names such as
    ``icon@2x.png``, message ids in mail headers (``Message-ID: <id@host>``), and service
    accounts (``x@project.iam.gserviceaccount.com``), which name machines, not people.
    """

    kinds = ("email",)
    gate = r"[A-Za-z0-9._%+\-]@[A-Za-z0-9]"
    _local = re.compile(r"[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}$")
    _domain = re.compile(
        r"[A-Za-z0-9][A-Za-z0-9\-]{0,62}(?:\.[A-Za-z0-9\-]{1,63}){0,8}\.(?P<tld>[A-Za-z]{2,24})"
        r"(?![^\W\d_]|\.[A-Za-z0-9])"
    )

    def find(self, text: str) -> Iterator[Finding]:
        at = text.find("@")
        while at != -1:
            domain = self._domain.match(text, at + 1)
            if domain and domain.group("tld").lower() in _FILE_EXTENSIONS:
                # A file named after an address (``notes/alice@example.org.md``): the address
                # starts the name without its extension, when that holds a domain.
                extension = len(domain.group("tld")) + 1
                domain = self._domain.match(text, at + 1, domain.end() - extension) or domain
            local = self._local.search(text, max(0, at - 64), at) if domain else None
            if domain and local and self._is_address(text, local.start(), local.group(0), domain):
                yield Finding(local.start(), domain.end(), "email")
            at = text.find("@", at + 1)

    @staticmethod
    def _is_address(text: str, start: int, local: str, domain: re.Match[str]) -> bool:
        tld = domain.group("tld").lower()
        if local == "git" or tld in _FILE_EXTENSIONS:
            return False
        if text[domain.end() : domain.end() + 1] in _GLUE and tld not in _GLUED_TLDS:
            return False
        if domain.group().lower().endswith(_MACHINE_DOMAINS):
            return False
        if _MESSAGE_ID_HEADER.match(text, text.rfind("\n", 0, start) + 1):
            return False
        line_start = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start))
        return not _URL_USERINFO.search(text, line_start + 1, start)


class IbanDetector:
    """IBANs, compact or in groups of four, in capitals or all in lower case (as a form or a
    message may hold one; mixed case is an identifier's), with valid check digits.

    The candidate is as long as its country's IBAN (ISO 13616), counted from its start, so the
    word after a grouped IBAN (``... 6892 with``, ``... 00 by``) is not read as its last group.
    """

    kinds = ("iban",)
    gate = r"[A-Za-z]{2}\d{2} ?[A-Za-z0-9]{4} ?[A-Za-z0-9]{4}"
    _candidate = re.compile(
        r"[A-Za-z]" + _AFTER_WORD_START + r"[A-Za-z]\d{2}(?: ?[A-Za-z0-9]{4}){2,7}"
        r"(?: ?[A-Za-z0-9]{1,3})?(?![A-Za-z0-9])"
    )

    def find(self, text: str) -> Iterator[Finding]:
        for match in self._candidate.finditer(text):
            length = _iban_length(match.group(0))
            if length is not None:
                yield Finding(match.start(), match.start() + length, "iban")


def _iban_length(written: str) -> int | None:
    """The length of the IBAN ``written`` starts with, blanks included; None without one."""
    letters = IBAN_LENGTHS.get(written[:2].upper())
    if letters is None:
        return None
    end = counted = 0
    while end < len(written) and counted < letters:
        counted += written[end] != " "
        end += 1
    if counted < letters:
        return None
    if end < len(written) and written[end] != " ":
        return None  # its country's length ends inside a group: a longer code, not an IBAN
    iban = written[:end]
    if not (iban.isupper() or iban.islower()):
        return None
    return end if iban_valid(iban.replace(" ", "").upper()) else None


PERSONAL_DETECTORS: tuple[Detector, ...] = (
    EmailDetector(),
    # Before cards: an IBAN's digit groups can form a Luhn-valid card number.
    IbanDetector(),
    # A card number may be glued to a label (``card4111...``, ``cc_4111...``, ``4111...-x``):
    # only digits and number punctuation around it make it part of something longer (a ``-``
    # after it only when a digit follows). Issuer prefix, length and Luhn check keep
    # identifiers out.
    RegexDetector(
        "payment_card",
        re.compile(
            r"\d(?<![\d.+\-/].)\d{3}(?P<sep>[ \-]?)"
            r"(?:\d{4}(?P=sep)\d{4}(?P=sep)\d{1,7}|\d{6}(?P=sep)\d{4,5})(?![\d/]|[\-.]\d)"
        ),
        r"\d{4}[ \-]?\d{4}[ \-]?\d{4}|\d{4}[ \-]?\d{6}[ \-]?\d{4}",
        validate=_card,
    ),
    _numeric(
        "us_ssn",
        r"\d",
        r"\d{2}(?P<sep>[ \-])\d{2}(?P=sep)\d{4}",
        r"\d{3}[ \-]\d{2}[ \-]\d{4}",
        _ssn,
    ),
    _word(
        "uk_nino",
        "[A-CEGHJ-PR-TW-Z]",
        r"[A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]",
        r"[A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-D]",
        _nino,
    ),
    _numeric(
        "fr_nir",
        "[12]",
        r" ?\d{2} ?(?:0[1-9]|1[0-2]|[2-9]\d) ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}",
        r"[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}",
        _nir,
    ),
    _word("es_dni", r"\d", r"\d{7}[ \-]?[A-Z]", r"\d{8}[ \-]?[A-Z]", _dni),
    # E.164 and international notation: + country code, 8 to 15 digits, common separators.
    RegexDetector(
        "phone",
        re.compile(r"\+(?<![\w+].)[1-9](?:[ .\-]?\(?\d\)?){7,14}" + _NUMBER_END),
        r"\+[1-9](?:[ .\-]?\(?\d\)?){7}",
        validate=_international_phone,
    ),
    # North America: (415) 555-2671, 415-555-2671, 415.555.2671 (area and exchange start 2-9).
    _numeric(
        "phone",
        r"[(2-9]",
        r"(?:(?<=\()[2-9]\d{2}\) ?|(?<=[2-9])\d{2}[\-. ])[2-9]\d{2}[\-. ]\d{4}",
        r"(?:\(\d{3}\) ?|\d{3}[\-. ])\d{3}[\-. ]\d{4}",
    ),
    # UK: 020 7946 0958, 07700 900123, 0161 496 0000 (11 digits, spaced).
    _numeric("phone", "0", r"\d{2,4} \d{3,4} ?\d{3,4}", r"0\d{2,4} \d{3,4} ?\d{3,4}", _uk_phone),
    # France: 01 23 45 67 89, 06.12.34.56.78.
    _numeric(
        "phone",
        "0",
        r"[1-9](?:(?P<sep>[ .])\d{2})(?:(?P=sep)\d{2}){3}",
        r"0[1-9][ .]\d{2}[ .]\d{2}[ .]\d{2}[ .]\d{2}",
    ),
)
