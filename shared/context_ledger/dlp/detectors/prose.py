"""A password written in a sentence, a few words after the word for it.

``NamedKeyDetector`` reads ``password: X`` and ``the password is X``, a name and its value side by
side. Notes, tickets and chat put words between them: ``The password for the admin account is
'Adm1n!2024'``, ``Password for root: ...``, ``the password was set to ...``, ``The password,
..., was shared``, ``**password**: ...``, ``password → ...``, or the value on the line after
``Password:``. Here the word for password (in any of the languages ``assignment.PASSWORD_WORDS``
knows) opens a window of the next few words of its sentence, and each of them that is shaped
like a chosen password is taken for one (a user name shaped like one too, ``for John.Smith2``,
rather than miss the password after it):

- 8+ characters with a letter and a digit, and a symbol or both cases (``Gr4n1te&Fox16``,
  ``Blu3-Moon-88``, ``Tr0ub4dor``);
- not an algorithm's or a format's name: all capitals (``PBKDF2-HMAC-SHA256``, ``AES-256-GCM``)
  or all lower case with nothing but joiners between its parts (``bcrypt-sha256``, ``argon2id``);
- not a URL (``https://...``, ``www.``): the reset link a sentence points to.

A short or plain value (``hunter2``, ``letmein``) stays, as in ``the password is hunter2``: in a
sentence it cannot be told from a word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from context_ledger.dlp.detectors.assignment import PASSWORD_WORDS
from context_ledger.dlp.detectors.base import Finding

#: How many words after the name a value may come (``for the admin account is``: five).
WINDOW_WORDS = 6

# The name as a word of a sentence: not part of an identifier, a path or a URL before it
# (``DB_PASSWORD``, ``user:password@host``), and after it a blank, or a colon or comma and a
# blank or the line's end, past the markup closing it; ``password=`` is an assignment.
_NAME = re.compile(
    rf"(?i)(?<![\w.\-/:@$])(?:{PASSWORD_WORDS})"
    r"(?=[*_`'\"]*(?:[ \t]|[:,](?:[ \t]|\r?\n|\Z)|\r?\n|\Z))"
)
# After the name: markup closing it (``**password**``, `` `password` ``), then a colon at the end
# of its line puts the value on the next one.
_VALUE_ON_NEXT_LINE = re.compile(r"[*_`'\"]*[ \t]*:[ \t]*\r?\n[ \t]*")
_WORD = re.compile(r"\S+")
# Quotes, brackets and markup around a word, and the punctuation ending a sentence's word.
_OPENERS = "([{'\"`\u201c\u2018*_"
_CLOSERS = ")]}'\"`\u201d\u2019*_.,;:"  # not ``!`` or ``?``: a password ends in them as often
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
_JOINERS = frozenset("-_./")


def chosen_password(word: str) -> bool:
    """Whether ``word`` is shaped like a chosen password (module docstring)."""
    if len(word) < 8 or not any(c.isdigit() for c in word):
        return False
    if "://" in word or word.lower().startswith("www."):
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
    return symbol or (upper and lower)


class PasswordInProseDetector:
    """Passwords a few words after the word for them (module docstring)."""

    kinds = ("password",)
    gate = rf"(?i){PASSWORD_WORDS}"

    def find(self, text: str) -> Iterator[Finding]:
        for name in _NAME.finditer(text):
            yield from self._values_after(text, name.end())

    @staticmethod
    def _values_after(text: str, start: int) -> Iterator[Finding]:
        next_line = _VALUE_ON_NEXT_LINE.match(text, start)
        if next_line is not None:
            start = next_line.end()
        end = _SENTENCE_END.search(text, start)
        window = text[start : len(text) if end is None else end.start() + 1]
        for word in list(_WORD.finditer(window))[:WINDOW_WORDS]:
            raw = word.group()
            core = raw.lstrip(_OPENERS)
            lead = len(raw) - len(core)
            core = core.rstrip(_CLOSERS)
            if chosen_password(core):
                begin = start + word.start() + lead
                yield Finding(begin, begin + len(core), "password")
