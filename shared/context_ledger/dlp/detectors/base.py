"""What a detector is: something that finds typed spans of sensitive text."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import re2

Validator = Callable[[re.Match[str]], bool]


class Finding(NamedTuple):
    """A span ``text[start:end]`` that holds sensitive data of ``kind``."""

    start: int
    end: int
    kind: str


class Detector(Protocol):
    """Finds sensitive spans in a text; ``kinds`` lists every kind it can report.

    ``gate`` is an RE2 pattern that matches somewhere in every text the detector finds
    something in (its marker, or the shape of its pattern without lookaround and without long
    counted repetitions, which make the combined automaton slow), or None to always run.
    The redactor runs all gates at once as one RE2 set, a single linear pass, and runs a
    detector only where its gate matched: ordinary text costs one pass instead of one per
    detector.
    """

    kinds: tuple[str, ...]
    gate: str | None

    def find(self, text: str) -> Iterator[Finding]: ...


@dataclass(frozen=True)
class RegexDetector:
    """A regular expression with its gate (see ``Detector``) and an optional validator.

    ``groups``: the capture group that is redacted, the first of them that took part in the match
    (default: the whole match), so a key name or URL around a secret stays readable.
    ``validate`` sees the match and may veto it.

    ``anchored``: the pattern is only tried (``match``) where the gate matches, which must be
    where the pattern's own match would start. For patterns that Python's engine cannot scan
    fast (case-insensitive alternations of key names), RE2 finds the few places instead.
    """

    kind: str
    pattern: re.Pattern[str]
    gate: str | None
    groups: tuple[int | str, ...] = (0,)
    validate: Validator | None = None
    anchored: bool = False

    def __post_init__(self) -> None:
        if self.anchored:
            if self.gate is None:
                raise ValueError(f"anchored detector {self.kind} needs a gate")
            options = re2.Options()
            options.log_errors = False
            object.__setattr__(self, "_anchor", re2.compile(self.gate, options))

    @property
    def kinds(self) -> tuple[str, ...]:
        return (self.kind,)

    def find(self, text: str) -> Iterator[Finding]:
        for match in self._matches(text):
            if self.validate is not None and not self.validate(match):
                continue
            for group in self.groups:
                start, end = match.span(group)
                if start < end:
                    yield Finding(start, end, self.kind)
                    break

    def _matches(self, text: str) -> Iterator[re.Match[str]]:
        if not self.anchored:
            yield from self.pattern.finditer(text)
            return
        resume = 0
        for anchor in self._anchor.finditer(text):
            if anchor.start() < resume:
                continue
            match = self.pattern.match(text, anchor.start())
            if match:
                resume = match.end()
                yield match
