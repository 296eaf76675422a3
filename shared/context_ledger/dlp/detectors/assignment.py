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
from context_ledger.dlp.normalise import fold

MAX_VALUE = 500
#: A quoted value may be long: a PEM key in a JSON string is one line of ~1,700 characters.
MAX_QUOTED = 16_384

# Values that name a secret instead of holding one: environment and template references,
# placeholders, masks, elided examples (``ctxl_...``), ARNs and vault paths, null-ish literals,
# type names, and code (calls, subscripts, attribute access).
REFERENCE = re.compile(
    r"""\$\{?[A-Za-z_][A-Za-z0-9_.:-]*\}?|\$\{[A-Za-z_][^{}]*\}|\$\{\{.*\}\}|\{\{.*\}\}|\$\(.*\)|%[A-Za-z_]\w*%
    |<[^<>]*>|\(.*\)|%\([^)]*\)s|\{[A-Za-z_.]*\}|\#\{.*\}|!(?:Ref|Sub|GetAtt|ImportValue)\b.*
    |\*+|x+|X+|\.\.\.|\S*\.\.\.|\[REDACTED:[a-z0-9_]+\]|arn:.*
    |[a-z][a-z0-9+.\-]*://[^@\s]*|(?:vault|ssm|secretsmanager|keyvault|op|sops):.*
    |[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:\(.*\)|\[.*\])
    |[A-Za-z_$][A-Za-z_$]*(?:\.[A-Za-z_$][A-Za-z_$]*)+
    |\*{4,}[^*\s]{0,6}|[^*\s]{0,6}\*{4,}
    |(?i:none|null|nil|true|false|yes|no|on|off|undefined|str|string|bytes|int|secretstr
    |required|optional)""",
    re.VERBOSE,
)
# Documentation placeholders (docs/decisions.md, "placeholders"): published, so not secrets.
PLACEHOLDER = re.compile(
    r"(?i)change[_-]?(?:me|it|this)|replace[_-]?(?:me|this)|placeholder|dummy|redacted|masked"
    r"|(?:your|my)(?:[_-][a-z_-]*|[a-z]*here"
    r"|(?:api|secret|access)?(?:pass(?:word)?|pwd|secret|key|token))"
    r"|[a-z_-]*[_-]here|todo|tbd|fixme|example|sample"
)
# A bare value naming another variable: ``password=db_password``, ``token: authToken``.
_NAMES_A_SECRET = re.compile(r"(?i)pass|pwd|secret|token|key|cred|auth")
_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z_$.]*")
# A passphrase written as one word (``mysupersecretjwtsigningkey``): names of things are joined
# (``my-app-secret``), variables in code are snake_case or camelCase; none is 16+ lower-case
# letters alone, as no word of prose is either.
_PASSPHRASE = re.compile(r"[a-z]{16,}")

_QUOTES = "'\"`"
_CLOSERS = {")": "(", "]": "[", "}": "{", ">": "<"}
_FIELD_END = frozenset("#,;&|)]}'\"`")
# In a ";" list an XML entity (``&amp;``) is part of the value, not the end of the field.
_BARE_END = {
    ";": re.compile(r"(?:&(?:[a-z]{2,6}|#\d{1,6}|#x[0-9a-fA-F]{1,6});|[^\s;])*"),
    "&": re.compile(r"[^\s&]*"),
    "": re.compile(r"\S*"),
}


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
    """Where the key token ending at ``end`` starts (letters of any script, digits, ``_``,
    ``.``, ``-``)."""
    token = _KEY_TOKEN_END.search(text, max(0, end - 128), end)
    return end if token is None else token.start()


_KEY_TOKEN_END = re.compile(r"[\w.\-]+\Z")


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
    opening = _opening_quote(text, position)
    if opening is not None:
        quote, escapes = opening
        start = position + escapes + len(quote)
        # A quoted command substitution holds quotes of its own: ``"$(cat "$f")"`` is one value.
        close = _closing_quote(text, start, quote, escapes, after=_reference_end(text, start))
        if close is not None:
            return Value(start, close, quoted=True, ends_field=True)
        position = start
    end = _BARE_END[separator].match(text, position, min(length, position + MAX_VALUE)).end()  # type: ignore[union-attr]
    end = max(end, _reference_end(text, position))
    end = _strip_closers(text, position, end)
    if end <= position:
        return None
    return Value(position, end, quoted=False, ends_field=_ends_field(text, end))


# Quotes as XML writes them inside an attribute (ADO.NET ``Password=&apos;...&apos;``).
_ENTITY_QUOTES = ("&apos;", "&quot;")
_CLOSING = {"{": "}"}


def _opening_quote(text: str, position: int) -> tuple[str, int] | None:
    """The quote a value opens with and how many backslashes escape it (``\\"`` inside an
    encoded JSON string is that string's quote), or None for a bare value."""
    escapes = 0
    while text.startswith("\\", position + escapes):
        escapes += 1
    char = text[position + escapes : position + escapes + 1]
    if char and char in _QUOTES:
        return char, escapes
    if escapes == 0:
        for entity in _ENTITY_QUOTES:
            if text.startswith(entity, position):
                return entity, 0
        # ODBC and ADO.NET quote a value holding ";" in braces: ``Pwd={a;b}``.
        if char == "{" and not text.startswith("{{", position):
            return "{", 0
    return None


# Openers of references that may hold blanks (``$(cat /run/secrets/db)``, ``<your password>``).
_OPENERS = (("$(", ")"), ("${{", "}}"), ("${", "}"), ("{{", "}}"), ("<", ">"), ("%(", ")"))


def _reference_end(text: str, start: int) -> int:
    """The end of a reference opened at ``start`` and closed on the same line, else ``start``."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    if text.startswith("$(", start):
        return _substitution_end(text, start, line_end)
    for opener, closer in _OPENERS:
        if text.startswith(opener, start):
            close = text.find(closer, start + len(opener), line_end)
            return start if close < 0 else close + len(closer)
    return start


def _substitution_end(text: str, start: int, line_end: int) -> int:
    """The end of ``$(...)`` at ``start``, its parentheses balanced (``$(print(x))``)."""
    depth = 0
    for index in range(start + 1, line_end):
        char = text[index]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return index + 1
    return start


def _closing_quote(
    text: str, start: int, quote: str, escapes: int, *, after: int = 0
) -> int | None:
    """Where a value opened by ``quote`` behind ``escapes`` backslashes ends: at the next such
    quote behind exactly as many (more make an escaped quote inside it), on the same line, not
    before ``after``."""
    line_end = text.find("\n", start)
    limit = min(len(text) if line_end < 0 else line_end, start + MAX_QUOTED)
    quote = _CLOSING.get(quote, quote)
    index = text.find(quote, max(start, after), limit)
    while index != -1:
        run = 0
        while index - run - 1 >= start and text[index - run - 1] == "\\":
            run += 1
        if run == escapes and index - escapes > start:
            return index - escapes
        index = text.find(quote, index + len(quote), limit)
    return None


def _strip_closers(text: str, start: int, end: int) -> int:
    """Drop what closes an enclosing construct: unbalanced brackets and quotes, a final ``,;``,
    and an escaped line break (``\\n`` ends a line of source held in a JSON string)."""
    while end > start:
        char = text[end - 1]
        value = text[start:end]
        if value.endswith(("\\n", "\\r", "\\t")):
            end -= 2
            continue
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
        and _PASSPHRASE.fullmatch(value) is None
    )


def looks_secret(value: str) -> bool:
    """8+ characters mixing letters with digits or symbols, no blank: a secret even amid prose."""
    return (
        len(value) >= 8
        and not value.isdigit()
        and not value.isalpha()
        and _LETTER.search(value) is not None
        and _BLANK.search(value) is None
    )


_LETTER = re.compile(r"[^\W\d_]")
# Letters joined by hyphens, underscores, slashes or apostrophes, as a sentence may hold them
# (``case-sensitive``, ``end-to-end``, ``user_defined``, ``N/A``), in brackets or quotes or not,
# its sentence's punctuation after it.
_PROSE_WORD = re.compile(
    "[(\\[\"'\u201c\u2018]?[^\\W\\d_]+(?:[-_/'\u2019][^\\W\\d_]+)*[)\\]\"'\u201d\u2019]?[.,:;!?]*"
)


def is_prose_word(value: str) -> bool:
    """Whether ``value`` is a word of prose (letters joined by ``-``, ``_``, ``/`` or an
    apostrophe, no digit), which no rule should read as a secret for its joiners alone."""
    return _PROSE_WORD.fullmatch(value) is not None


#: Punctuation that ends a word of prose (``Password Security: A Case History``): after a blank
#: separator it belongs to the sentence, so it does not make the word look like a secret.
_SENTENCE_END = ".,:;!?"

_BLANK = re.compile(r"\s")


# Key names, not secrets, as the last words of a key: the words may be joined by ``_``, ``-``,
# ``.``, a blank or nothing (``api_key``, ``mailgun.api.key``, ``API key``, ``MailgunApiKey``).
# Short names must start a word of the key (``db_pwd``, ``dbPwd``, ``--pw``), so ``bypass`` is
# no password; a flag or an upper-case key may end in one (``--requirepass``, ``DBPASS``).
_J = r"[._ \-]?"
# ``user.info`` / ``userinfo`` hold ``user:password`` (Kafka's basic.auth.user.info, URLs).
# Then the word for password in the languages a team's notes are most often written in, as the
# detectors read it (dlp/normalise.py: ``contraseña`` as ``contrasena``, the Cyrillic letters of
# ``пароль`` that look Latin as Latin). Japanese, Chinese and Korean write no blank between
# words, so ``prose`` finds theirs anywhere (``CJK_PASSWORD_WORDS``).
_CJK_PASSWORD_WORDS = ("パスワード", "密码", "密碼", "비밀번호")
_PASSWORD_WORDS = (
    "passwort", "kennwort", "mot de passe", "contraseña", "senha", "wachtwoord", "hasło",
    "lösenord", "adgangskode", "passord", "salasana", "heslo", "пароль", "şifre", "jelszó",
    *_CJK_PASSWORD_WORDS,
)  # fmt: skip
#: The names of a password a sentence uses (no short ones: ``pass``, ``pw`` and French ``mdp``
#: are words or abbreviations too, names only where a value is assigned to them).
PASSWORD_WORDS = rf"pass{_J}(?:word|wd|phrase)|" + "|".join(
    dict.fromkeys(re.escape(fold(word).text).replace(r"\ ", _J) for word in _PASSWORD_WORDS)
)
CJK_PASSWORD_WORDS = "|".join(re.escape(fold(word).text) for word in _CJK_PASSWORD_WORDS)
#: A Wi-Fi network's key is its password (``wifi key``, ``Wi-Fi key``, ``WPA2 key``).
PASSWORD_NAMES = rf"{PASSWORD_WORDS}|pwd|pw|pass|mdp|user{_J}info|(?:wi{_J}fi|wlan|wpa2?){_J}key"
SECRET_NAMES = (
    rf"secret(?:{_J}key(?:{_J}base)?)?|token|api{_J}key|access{_J}key|private{_J}key|signing{_J}key|encryption{_J}key"
    rf"|credentials?|account{_J}key|shared{_J}access{_J}(?:key|signature)|sig|signature"
    rf"|auth(?:{_J}key)?|master{_J}key|session{_J}key|licen[cs]e{_J}key|app{_J}key|sas"
    rf"|salt|nonce{_J}key|webhook{_J}secret|unseal{_J}key|recovery{_J}key"
)
#: A bare ``key`` holds secrets and everything else (``cache_key``, ``key: tls.crt``): its value
#: counts only when it is key-shaped (``_key_shaped``).
WEAK_NAMES = "key"
_SHORT = 4
_KEY_KIND = re.compile(
    rf"(?i)(?:(?P<password>{PASSWORD_NAMES})|(?P<secret>{SECRET_NAMES})|(?P<weak>{WEAK_NAMES}))\Z"
)
_SEPARATOR_SIGN = r"""(?:\\?['"])?[ \t]*(?::=|=>|[:=])|>"""
_SEPARATOR_BLANK = r"[ \t]+(?:(?:is|was)[ \t]+)?"
_SEPARATOR = rf"{_SEPARATOR_SIGN}|{_SEPARATOR_BLANK}"
NAME_PATTERN = rf"(?:{PASSWORD_NAMES}|{SECRET_NAMES}|{WEAK_NAMES})"
_KEY_PATTERN = re.compile(rf"(?i)(?P<key>{NAME_PATTERN})(?P<sep>{_SEPARATOR})")
# A key and its value in two fields: Kubernetes and CI ``name:``/``value:``, Postman's
# ``"key": ..., "value": ...``, XML ``<add key="..." value="..."/>``, ``<property name=...``.
# On RE2: Python's engine tries it at every "name" and "key" of a text (50 ms on this
# repository, 5 ms on RE2).
_PAIR = (
    r"""(?i)(?:name|key)['"]?[ \t]*[:=][ \t]*"""
    r"""['"]?(?P<name>[A-Za-z_][\w.\-]*)['"]?[ \t]*,?"""
    r"""[ \t]*(?:\r?\n[ \t]*)?['"]?value['"]?[ \t]*[:=][ \t]*"""
)
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_PAIR_PATTERN = re2.compile(_PAIR, _RE2_OPTIONS)
# An XML element named by an attribute, the value its text: Android's
# ``<string name="backend_api_key">...</string>``, ``<entry name="password">``.
_NAMED_ELEMENT = re.compile(r"""(?i)<[\w:.\-]+[^<>]*?\bname=["'](?P<name>[\w.\-]+)["'][^<>]*>""")
# ``define('AUTH_KEY', '...')`` (PHP) and ``ENV['API_TOKEN'] = ...`` style calls: a quoted key,
# a comma, the value.
_DEFINE = re.compile(r"""(?i)define\([ \t]*['"](?P<name>[\w.\-]+)['"][ \t]*,[ \t]*""")
_KEY_SHAPED = re.compile(
    r"(?:[A-Za-z]{1,8}[-_])?[0-9a-fA-F]{32,}|[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
)


def key_kind(key: str) -> str | None:
    """``password``, ``secret`` or ``weak`` (a bare ``key``) when the key token's last words name
    one, else None."""
    match = _KEY_KIND.search(key)
    if match is None:
        return None
    start = match.start()
    name = match.group()
    embedded = len(name) <= _SHORT and start > 0 and not _word_starts(key, start)
    if embedded and not (key.startswith("-") or key.isupper()):
        return None
    return match.lastgroup


def _word_starts(key: str, index: int) -> bool:
    before = key[index - 1]
    return not before.isalnum() or (before.islower() and key[index].isupper())


class NamedKeyDetector:
    """Values assigned to keys that name a password or a secret, whole (module docstring).

    Password values need 3+ characters; secret values 8+ with a digit (``token: bearer`` and
    ``secret: my-app-secret`` name things) or a passphrase of 16+ lower-case letters; a bare
    ``key``'s value must be key-shaped. None may be a reference or placeholder.
    """

    kinds = ("password", "secret")
    gate = (
        rf"(?i){NAME_PATTERN}(?:{_SEPARATOR})"
        r"""|(?i)value['"]?[ \t]*[:=]|define\(|name=['"]"""
    )

    def __init__(self) -> None:
        options = re2.Options()
        options.log_errors = False
        # A bare "key" followed by a blank is prose ("the key is"), never a flag's value worth
        # reading: only the stronger names anchor a blank separator.
        self._anchor = re2.compile(
            rf"(?i){NAME_PATTERN}(?:{_SEPARATOR_SIGN})"
            rf"|(?:{PASSWORD_NAMES}|{SECRET_NAMES})(?:{_SEPARATOR_BLANK})",
            options,
        )

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
        if "value" in text or "VALUE" in text or "Value" in text:
            yield from self._paired(text, _PAIR_PATTERN)
        if "define(" in text:
            yield from self._paired(text, _DEFINE)
        if "name=" in text:
            yield from self._paired(text, _NAMED_ELEMENT)

    def _assigned(self, text: str, match: re.Match[str]) -> Finding | None:
        # The key token around the name, from the name's start: a name of several words
        # (``API key``, ``mot de passe``) stays whole.
        start = key_start(text, match.start("key"))
        key = text[start : match.end("key")]
        kind = key_kind(key)
        if kind is None:
            return None
        separator = match.group("sep")
        flag = key.startswith("-")
        blank = separator.strip().lower() in ("", "is", "was")
        if separator == ">" and not text.endswith("<", 0, start):
            return None
        if separator == ">":
            value = _element_text(text, match.end())
        else:
            value = read_value(text, match.end(), delimiter(text, start))
        if value is None:
            return None
        literal = value.of(text)
        if not is_literal(literal, kind, quoted=value.quoted):
            return None
        # A blank separates a key from its value in flags, declarations (``ENV KEY v``), netrc
        # files and prose (``the password is X``): then the value must look like a secret.
        if blank and not (
            _declares(text, start)
            or (looks_secret(literal.rstrip(_SENTENCE_END)) and not is_prose_word(literal))
            or (flag and value.quoted and looks_secret(literal.replace(" ", "")))
        ):
            return None
        # Shell style, ``PGPASSWORD=s3cret psql``: glued to its ``=``, the value ends at a blank.
        glued = separator == "=" and value.start == match.end()
        if not (value.ends_field or flag or blank or glued or looks_secret(literal)):
            return None
        return Finding(value.start, value.end, REPORTED_KINDS[kind])

    def _paired(self, text: str, pattern: re.Pattern[str] | re2._Regexp) -> Iterator[Finding]:
        for item in pattern.finditer(text):
            kind = key_kind(item.group("name"))
            if kind is None:
                continue
            if pattern is _NAMED_ELEMENT:
                value = _element_text(text, item.end())
            else:
                value = read_value(text, item.end(), "")
            if value is not None and is_literal(value.of(text), kind, quoted=value.quoted):
                yield Finding(value.start, value.end, REPORTED_KINDS[kind])


REPORTED_KINDS = {"password": "password", "secret": "secret", "weak": "secret"}


def _element_text(text: str, start: int) -> Value | None:
    """An XML element's text from ``start`` to its closing tag, on one line, not blank."""
    close = text.find("</", start)
    if close <= start or "\n" in text[start:close] or "<" in text[start:close]:
        return None
    if not text[start:close].strip():
        return None
    return Value(start, close, quoted=True, ends_field=True)


_DECLARATION = re.compile(r"[ \t]*(?i:env|arg|set|setx)[ \t]+")


def _declares(text: str, start: int) -> bool:
    """``ENV KEY value`` / ``ARG`` (Dockerfile) and ``set KEY value``: a blank separates."""
    line = text.rfind("\n", 0, start) + 1
    return _DECLARATION.fullmatch(text, line, start) is not None


# A value that is itself a list of parameters (``?sv=...&sig=...``, ``a=1;b=2``): its own keys
# are read one by one (``sig=`` is the secret), not the whole list.
_PARAMETERS = re.compile(r"\??[\w.\-]+=[^&;]*(?:[&;][\w.\-]+=[^&;]*)+")


def is_parameter_list(value: str) -> bool:
    return _PARAMETERS.fullmatch(value) is not None


def is_literal(value: str, kind: str, *, quoted: bool) -> bool:
    if is_reference(value, quoted=quoted) or is_parameter_list(value):
        return False
    if kind == "password":
        return len(value) >= 3
    if kind == "weak":
        return _KEY_SHAPED.fullmatch(value) is not None or _mixed_token(value)
    if _PASSPHRASE.fullmatch(value):
        return True
    return len(value) >= 8 and any(c.isdigit() for c in value) and not value.isdigit()


def _mixed_token(value: str) -> bool:
    """20+ characters of a token alphabet mixing upper case, lower case and digits."""
    return (
        len(value) >= 20
        and re.fullmatch(r"[A-Za-z0-9+/=_\-]+", value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )
