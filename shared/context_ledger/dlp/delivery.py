"""How a retrieval delivers a source's chunks, by the organisation's DLP action (docs/api.md,
"DLP").

Whoever may search a space receives its sources' chunks (spec: ``drop`` and ``block_source``
sources "are searchable through full-text only"):

- ``allow``: as stored;
- ``redact``, ``drop``, ``block_source``: redacted with the organisation's rules (``drop`` and
  ``block_source`` sources are also never embedded, so only the full-text search finds them).

A classification the policy withholds (``DlpPolicy.withheld``) reaches no one; its sources are left
out before the search (no per-level slot, no budget, nothing to learn from scores) and the answer
warns that the searched spaces hold withheld sources.

"Redacted" means every text served from the store, not only a chunk's content: its path, symbol
and metadata strings, its source's name, a memory's content and metadata, on every route that
serves them (:class:`Delivery`). Identifiers the caller matches on (ids, hashes, the keys and
names a caller chose to address things by) are not text and pass as stored.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from context_ledger.dlp.classification import Classification
from context_ledger.dlp.detectors.assignment import REPORTED_KINDS, is_literal, key_kind
from context_ledger.dlp.policy import DlpAction, DlpPolicy
from context_ledger.dlp.redaction import CustomPattern, placeholder
from context_ledger.dlp.texts import redacted
from context_ledger.text.tokens import count_tokens


@dataclass(frozen=True)
class DeliveredText:
    """A chunk's text as the caller receives it, with the hash and size the evidence records."""

    content: str
    sha256: bytes
    tokens: int


#: Texts up to this length (paths, symbols, headings, names, languages, metadata values) are
#: redacted once per process and set of patterns: the same ones come back answer after answer,
#: and a scan costs about 8 µs however short its text, most of what a delivered chunk's other
#: fields cost besides its content (docs/decisions.md).
SHORT_TEXT = 256


def _delivered(patterns: tuple[CustomPattern, ...], text: str) -> str:
    return redacted(patterns, text, stage="delivery")  # a failed scan raises: never cached


_short_redacted = functools.lru_cache(maxsize=16_384)(_delivered)
#: Longer texts (chunk contents) are kept too, fewer of them: the chunks an organisation's
#: retrievals deliver repeat from answer to answer, and scanning 2 KB costs 0.25 ms of code and
#: 2.5 ms of a configuration file dense with secrets (a few MB at most: contents are cut at the
#: chunker's size).
_long_redacted = functools.lru_cache(maxsize=1024)(_delivered)


class Delivery:
    """The texts of one answer as the organisation's policy delivers them: as stored for a source
    whose action is ``allow``, redacted for every other action."""

    def __init__(self, policy: DlpPolicy) -> None:
        self.policy = policy

    def redacts(self, classification: Classification | str) -> bool:
        """Whether texts of this classification are delivered redacted."""
        return self.policy.action(classification) is not DlpAction.ALLOW

    def text(self, classification: Classification | str, text: str) -> str:
        return self.redact(text) if self.redacts(classification) else text

    def json(self, classification: Classification | str, value: Any) -> Any:
        return self.redact_json(value) if self.redacts(classification) else value

    def content(
        self, classification: Classification | str, *, content: str, sha256: bytes, tokens: int
    ) -> DeliveredText:
        """A chunk's content as delivered, with the hash and token count the evidence records.

        The stored hash and token count are kept when redaction changed nothing (the usual case),
        so only chunks that held something to redact are hashed and counted again.
        """
        if not self.redacts(classification):
            return DeliveredText(content, sha256, tokens)
        text = self.redact(content)
        if text == content:
            return DeliveredText(content, sha256, tokens)
        return DeliveredText(text, hashlib.sha256(text.encode()).digest(), count_tokens(text))

    # For a caller that asked `redacts` already (the texts of one chunk): no action looked up.

    def redact(self, text: str) -> str:
        if len(text) <= SHORT_TEXT:
            return _short_redacted(self.policy.patterns, text)
        return _long_redacted(self.policy.patterns, text)

    def redact_optional(self, text: str | None) -> str | None:
        return None if text is None else self.redact(text)

    def redact_json(self, value: Any, *, identifiers: Collection[str] = ()) -> Any:
        """A JSON value with every string in it redacted, keys included, at any depth; the values
        of the top-level keys in ``identifiers`` pass as stored. (Two keys that redact to the same
        placeholder keep the later value: both are delivered redacted either way.)"""
        if isinstance(value, dict):
            return {
                self.redact(key): item if key in identifiers else self._entry(key, item)
                for key, item in value.items()
            }
        return self._json(value)

    def _json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self._json(item) for item in value]
        if isinstance(value, dict):
            return {self.redact(key): self._entry(key, item) for key, item in value.items()}
        return value

    def _entry(self, key: str, item: Any) -> Any:
        """An object's value by its key: a string under a key naming a password or a secret is
        one whole, as ``password: Summer2024!`` in a text is (``{"password": "Summer2024!"}``:
        the value alone is a word with digits, which no detector takes for a credential)."""
        if isinstance(item, str):
            kind = key_kind(key)
            if kind is not None and is_literal(item, kind, quoted=True):
                return placeholder(REPORTED_KINDS[kind])
        return self._json(item)
