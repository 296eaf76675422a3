"""A password written in a sentence, a few words from the word for it.

``NamedKeyDetector`` reads ``password: X`` and ``the password is X``, a name and its value side by
side. Notes, tickets and chat put words between them: ``The password for the admin account is
'Adm1n!2024'``, ``Password for root: ...``, ``the password was set to ...``, ``The password,
..., was shared``, ``**password**: ...``, ``password → ...``, ``X is the password``, or the
value below the name (the next line, past a blank line, a code fence or a list marker). Here
the word for password (singular or plural, in any of the languages
``assignment.PASSWORD_WORDS`` knows) opens a window of the words of its sentence around it
(:data:`WORDS_AFTER` after it; before it, the one word that connecting words alone separate
from it), and each of them that is shaped
like a chosen password is taken for one (a user name shaped like one too, ``for John.Smith2``,
rather than miss the password after it):

- 8+ characters with a letter and a digit;
- a symbol other than a joiner (``Gr4n1te&Fox16``), or digits in two places (``Tr0ub4dor``,
  ``Blu3-Moon-88``): a product or an algorithm named with a version, ``Argon2id``,
  ``Ubuntu22.04``, ``1Password``, has digits in one;
- not an algorithm's or a format's name: all capitals (``PBKDF2-HMAC-SHA256``, ``AES-256-GCM``)
  or all lower case with nothing but joiners between its parts (``bcrypt-sha256``);
- not a URL (``https://...``, ``www.``), the reset link a sentence points to, nor a version
  (``v1.2-RC3``).

A short or plain value (``hunter2``, ``Summer2024``) stays unless written right after the name
(``the password is Summer2024``, the named-key detector's): in a sentence it cannot be told from
a word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from context_ledger.dlp.detectors.assignment import CJK_PASSWORD_WORDS, PASSWORD_WORDS
from context_ledger.dlp.detectors.base import Finding

#: How many words after the name a value may come (``that we agreed on for the staging box last
#: week is``: eleven).
WORDS_AFTER = 12
#: The words that may stand between a value and the name after it (``X is the new password``).
_CONNECTORS = frozenset(
    {"is", "was", "are", "as", "the", "a", "an", "our", "my", "your", "new", "its", "their"}
)
#: How many lines below a name that ends its line the value may be (blank lines, a code fence).
LINES_BELOW = 3

# The name as a word of a sentence: not part of an identifier, a path or a URL before it
# (``DB_PASSWORD``, ``user:password@host``), and after it a blank, or a colon or comma and a
# blank or the line's end, past the markup closing it; ``password=`` is an assignment.
# In Japanese, Chinese and Korean, which put no blank between words, the name is found
# anywhere, and a particle or copula after it (``パスワードは``, ``密码是``, ``비밀번호는``) or
# a colon, glued to the value as these scripts write it (``密码:X``), goes with it.
_NAME = re.compile(
    rf"(?i)(?<![\w.\-/:@$])(?:{PASSWORD_WORDS})s?"
    r"(?=[*_`'\"]*(?:[ \t]|[:,](?:[ \t]|\r?\n|\Z)|[.!?;)](?:\s|\Z)|<|\r?\n|\Z))"
    rf"|(?:{CJK_PASSWORD_WORDS})(?:は|が|も|是|为|為|는|은|가|이)?[ \t]*:?"
)
# What may follow a name that ends its line: markup closing it (``**password**``), a colon, a
# YAML block scalar's indicator (``password: >``), an HTML tag's end.
_REST_OF_NAME_LINE = re.compile(
    r"(?:[*_`'\"]|</?\w+>)*(?:[ \t]+(?i:is|are|was))?[ \t]*:?[ \t]*(?:[>|][+-]?)?[ \t]*$", re.M
)
# A line below it that holds no value: blank, a code fence.
_SKIPPED_LINE = re.compile(r"[ \t]*(?:```\w*|~~~\w*)?[ \t]*$")
# Words: runs of anything but blanks and HTML's angle brackets (``<td>Password</td><td>X``).
_WORD = re.compile(r"[^\s<>]+")
# Quotes, brackets and markup around a word, and the punctuation ending a sentence's word; a
# list item's or definition's marker before it.
_OPENERS = "([{'\"`\u201c\u2018*_"
_CLOSERS = ")]}'\"`\u201d\u2019*_.,;:\u3002"  # not ``!`` or ``?``: a password ends in them as often
_MARKERS = frozenset({"-", "*", "+", ":", ">", "|"})
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
_JOINERS = frozenset("-_./")
_DIGIT_RUNS = re.compile(r"\d+(?:\.\d+)*")
_VERSION = re.compile(r"[vV]?\d+(?:\.\d+)+(?:[-+][0-9A-Za-z.\-]+)?")


def chosen_password(word: str) -> bool:
    """Whether ``word`` is shaped like a chosen password (module docstring)."""
    if len(word) < 8 or not any(c.isdigit() for c in word):
        return False
    if "://" in word or word.lower().startswith("www.") or _VERSION.fullmatch(word):
        return False
    letters = [c for c in word if c.isalpha()]
    if not letters:
        return False
    upper = any(c.isupper() for c in letters)
    lower = any(c.islower() for c in letters)
    symbol = any(not c.isalnum() and c not in _JOINERS for c in word)
    if not lower:
        return False  # PBKDF2-HMAC-SHA256, AES-256-GCM
    if not upper and not symbol:
        return False  # bcrypt-sha256, argon2id
    return symbol or len(_DIGIT_RUNS.findall(word)) >= 2


class PasswordInProseDetector:
    """Passwords a few words from the word for them (module docstring)."""

    kinds = ("password",)
    gate = rf"(?i){PASSWORD_WORDS}"

    def find(self, text: str) -> Iterator[Finding]:
        for name in _NAME.finditer(text):
            yield from _chosen(text, *_after(text, name.end()), WORDS_AFTER)
            yield from _before(text, name.start())


def _after(text: str, start: int) -> tuple[int, int]:
    """The span the value may be in after a name ending at ``start``: the rest of its sentence,
    or, when the name ends its line, the first line below it that holds something."""
    rest = _REST_OF_NAME_LINE.match(text, start)
    if rest is not None:
        line = rest.end()
        for _ in range(LINES_BELOW):
            if line >= len(text):
                break
            end = text.find("\n", line + 1)
            below = line + 1, len(text) if end == -1 else end
            if not _SKIPPED_LINE.fullmatch(text, *below):
                return below
            line = below[1]
        return start, start
    end = _SENTENCE_END.search(text, start)
    return start, len(text) if end is None else end.start() + 1


def _before(text: str, end: int) -> Iterator[Finding]:
    """The word the name's sentence puts before it as its value (``X is the password``, ``Use
    X as password``): the first one, going back from the name, past connecting words only."""
    line = max(text.rfind("\n", 0, end) + 1, end - 200)
    for word in reversed(list(_WORD.finditer(text, line, end))):
        if word.group().lower() in _CONNECTORS:
            continue
        if word.group()[-1] in ".!?":
            return  # the end of the sentence before
        yield from _chosen(text, word.start(), word.end(), 1)
        return


def _chosen(text: str, start: int, end: int, words: int) -> Iterator[Finding]:
    """Each word shaped like a chosen password among the first ``words`` of ``text[start:end]``."""
    for n, word in enumerate(_WORD.finditer(text, start, end)):
        if n == words:
            return
        raw = word.group()
        if raw in _MARKERS:
            continue
        core = raw.lstrip(_OPENERS)
        lead = len(raw) - len(core)
        core = core.rstrip(_CLOSERS)
        if chosen_password(core):
            begin = word.start() + lead
            yield Finding(begin, begin + len(core), "password")
