"""Redaction: built-in and organisation detectors turn sensitive spans into typed placeholders.

``Redactor(custom).redact(text)`` returns the text with every finding replaced by
``[REDACTED:<kind>]``, how many of each kind were replaced, and each placeholder's span of the
input (``findings``). The rules:

- detectors read the text folded and with split tokens joined (``normalise``): fullwidth,
  look-alike and invisible characters cannot hide a secret, nor can a line break, a
  ``\\``-continuation or a string concatenation inside it; each finding is mapped back to the
  span of the input it came from, and only that span is replaced, so the rest of the text stays
  exactly as written. Base64 that decodes to text is rescanned decoded (``encoded``), and a
  finding there redacts the whole encoded run;

- overlapping findings merge into one placeholder, whose kind is that of the most specific
  detector involved (built-in detectors in their listed order, then custom patterns, then high
  entropy), ties going to the longest finding;
- placeholders already in the text are never rescanned or cut, so redacting redacted text
  changes nothing, and a placeholder never triggers a detector;
- redaction repeats until a pass finds nothing (replacing one span can complete another
  detector's pattern, e.g. a custom ``x\\[`` pattern next to a fresh placeholder), so the result
  is a fixed point; text without findings is scanned once;
- any detector error, or a scan past its deadline, raises ``ScanError``: the caller must then
  send nothing. Its message names the detector, never the text.

Organisation patterns run on RE2 (google-re2), whose matching time is linear in the text, so a
hostile pattern cannot hang a scan. Built-in patterns run on Python's ``re``; none of them nests
quantifiers (see ``detectors``), and the deadline is checked after every detector.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import re2

from context_ledger.dlp.detectors import BUILTIN_DETECTORS, Detector, Finding
from context_ledger.dlp.detectors.assignment import NamedKeyDetector
from context_ledger.dlp.encoded import decoded_runs
from context_ledger.dlp.normalise import Folded, fold, join_windows

MAX_CUSTOM_PATTERNS = 50
MAX_PATTERN_LENGTH = 1000
#: Memory RE2 may use to compile one pattern; larger programs (huge counted repetitions) fail.
MAX_PATTERN_MEMORY = 8 << 20
DEFAULT_DEADLINE_SECONDS = 5.0
#: Passes until a fixed point; text that still changes after this many is returned as it is
#: (more redacted than the input, never less).
_MAX_PASSES = 4

_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9_]{1,64}\]")
_PLACEHOLDER_MARK = "[REDACTED:"
_SENTINEL = 0  # index of the empty pattern in the gate set
#: Kinds whose value runs to the end of a token whatever it holds: a joined line break inside
#: one is more likely the end of the value than a split (``password=x`` then the next line).
_OPEN_ENDED = frozenset(NamedKeyDetector.kinds)


class ScanError(Exception):
    """A detector failed or the scan ran past its deadline; nothing may be sent."""


@dataclass(frozen=True)
class CustomPattern:
    """An organisation's own pattern; its matches become ``[REDACTED:custom_<name>]``."""

    name: str
    pattern: str


@dataclass(frozen=True)
class Redaction:
    """Redacted text, the number of placeholders put in per kind, and where each one sits in
    the input: ``findings[i]`` is the span of the input that the i-th placeholder replaced."""

    text: str
    counts: Mapping[str, int]
    findings: tuple[Finding, ...] = ()


def placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


class CustomPatternDetector:
    """One organisation pattern, compiled by RE2.

    Ungated: its own RE2 scan is as fast as a gate would be, and keeping organisation patterns
    out of the shared gate set means no combination of them can make that set too big to build.
    """

    gate = None

    def __init__(self, name: str, compiled: re2._Regexp) -> None:
        self.kind = f"custom_{name}"
        self.kinds = (self.kind,)
        self._compiled = compiled

    def find(self, text: str) -> Iterator[Finding]:
        for match in self._compiled.finditer(text):
            start, end = match.span()
            if start < end:
                yield Finding(start, end, self.kind)


def compile_custom_patterns(patterns: Sequence[CustomPattern]) -> tuple[CustomPatternDetector, ...]:
    """Validate and compile organisation patterns; ``ValueError`` names the offending pattern.

    A name is ``[a-z][a-z0-9_]{0,39}`` and unique; a pattern is at most ``MAX_PATTERN_LENGTH``
    characters of RE2 syntax (no backreferences or lookaround), compiles within
    ``MAX_PATTERN_MEMORY`` and does not match the empty string; at most ``MAX_CUSTOM_PATTERNS``.
    """
    if len(patterns) > MAX_CUSTOM_PATTERNS:
        raise ValueError(f"at most {MAX_CUSTOM_PATTERNS} custom patterns are allowed")
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PATTERN_MEMORY
    seen: set[str] = set()
    detectors = []
    for custom in patterns:
        if not _NAME.fullmatch(custom.name):
            # Not repeated: a name breaking the rule can be anything pasted there.
            raise ValueError("a custom pattern's name must match [a-z][a-z0-9_]{0,39}")
        if custom.name in seen:
            raise ValueError(f"custom pattern {custom.name!r} is defined twice")
        seen.add(custom.name)
        if not custom.pattern or len(custom.pattern) > MAX_PATTERN_LENGTH:
            raise ValueError(
                f"custom pattern {custom.name!r} must be 1 to {MAX_PATTERN_LENGTH} characters"
            )
        try:
            compiled = re2.compile(custom.pattern, options)
        except re2.error as exc:
            reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
            raise ValueError(
                f"custom pattern {custom.name!r} is not a valid RE2 expression: {reason}"
            ) from None
        if compiled.fullmatch(""):
            raise ValueError(f"custom pattern {custom.name!r} matches the empty string")
        detectors.append(CustomPatternDetector(custom.name, compiled))
    return tuple(detectors)


class Redactor:
    """Redacts text with the built-in detectors plus an organisation's custom patterns.

    Build one per policy and reuse it: custom patterns are compiled once, here. ``detectors``
    replaces the built-in set (tests use it to plant a failing detector); ``clock`` is the
    monotonic clock the deadline is measured on.
    """

    def __init__(
        self,
        custom: Sequence[CustomPattern] = (),
        *,
        deadline_seconds: float = DEFAULT_DEADLINE_SECONDS,
        detectors: Sequence[Detector] = BUILTIN_DETECTORS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if deadline_seconds <= 0:
            raise ValueError("deadline_seconds must be positive")
        # Organisation patterns rank below the named built-ins and above the high-entropy
        # fallback (see "overlapping findings" in the module docstring).
        fallback = [d for d in detectors if "high_entropy" in d.kinds]
        named = [d for d in detectors if "high_entropy" not in d.kinds]
        self._detectors: tuple[Detector, ...] = (
            *named,
            *compile_custom_patterns(custom),
            *fallback,
        )
        self._rank = {
            kind: rank
            for rank, detector in reversed(list(enumerate(self._detectors)))
            for kind in detector.kinds
        }
        self._gates, self._gated = _gate_set(self._detectors)
        self._entropy_gates = [
            gate
            for detector, gate in zip(self._detectors, self._gated, strict=True)
            if "high_entropy" in detector.kinds and gate is not None
        ]
        self._deadline_seconds = deadline_seconds
        self._clock = clock

    def redact(self, text: str) -> Redaction:
        """``text`` with every finding replaced by its placeholder; ``ScanError`` on failure."""
        deadline = self._clock() + self._deadline_seconds
        counts: Counter[str] = Counter()
        passes: list[list[Finding]] = []
        for _ in range(_MAX_PASSES):
            spans = self._merge(self._scan(text, deadline), _placeholders(text))
            if not spans:
                break
            passes.append(spans)
            text = _replace(text, spans)
            counts.update(kind for _, _, kind in spans)
        return Redaction(
            text=text, counts=MappingProxyType(dict(counts)), findings=_in_input(passes)
        )

    def find(self, text: str) -> list[Finding]:
        """The merged findings of one pass over ``text`` (what ``redact`` replaces first)."""
        return self._merge(
            self._scan(text, self._clock() + self._deadline_seconds), _placeholders(text)
        )

    def _scan(self, text: str, deadline: float) -> list[Finding]:
        """Findings in ``text``'s offsets: of its folded form, of the tokens a join completes,
        and of the text its base64 runs encode."""
        try:
            folded = fold(text)
            opened = self._open(folded.text)
            windows = list(join_windows(folded.text))
            # Base64 of text mixes digits and both cases: where the entropy gate saw no such
            # run there is nothing to decode (most code and prose), and the scan is skipped.
            encoded = list(decoded_runs(folded.text)) if self._may_encode(opened) else []
        except Exception:
            raise ScanError("DLP normalisation failed") from None
        findings = [_in_source(folded, f) for f in self._detect(folded.text, deadline, opened)]
        for window in windows:
            for f in self._detect(window.text, deadline):
                if f.kind not in _OPEN_ENDED and window.completes(f.start, f.end):
                    start, end = window.offsets.span(f.start, f.end)
                    findings.append(_in_source(folded, Finding(start, end, f.kind)))
        for start, end, decoded in encoded:
            inner = self._detect(decoded, deadline)
            if inner:
                best = min(inner, key=lambda f: self._rank[f.kind])
                findings.append(_in_source(folded, Finding(start, end, best.kind)))
        return findings

    def _open(self, text: str) -> set[int]:
        """The gates that match ``text``. RE2::Set reports "no match" when its automaton runs
        out of memory; the always-matching sentinel tells that apart (then every gate is open)."""
        return set(self._gates.Match(text) or ())

    def _may_encode(self, opened: set[int]) -> bool:
        return _SENTINEL not in opened or any(gate in opened for gate in self._entropy_gates)

    def _detect(self, text: str, deadline: float, opened: set[int] | None = None) -> list[Finding]:
        """Every detector's findings in ``text`` as it is (the gate set first)."""
        findings: list[Finding] = []
        if opened is None:
            opened = self._open(text)
        all_open = _SENTINEL not in opened
        self._check(deadline)
        for index, detector in enumerate(self._detectors):
            gate = self._gated[index]
            if not all_open and gate is not None and gate not in opened:
                continue
            try:
                findings.extend(detector.find(text))
            except Exception:
                name = "/".join(detector.kinds)
                # from None: the original exception (and its traceback) may quote the text.
                raise ScanError(f"DLP detector {name} failed") from None
            self._check(deadline)
        return findings

    def _check(self, deadline: float) -> None:
        if self._clock() > deadline:
            raise ScanError(f"DLP scan exceeded its {self._deadline_seconds:g} s deadline")

    def _merge(self, findings: list[Finding], protected: list[tuple[int, int]]) -> list[Finding]:
        """Overlapping findings as one span each, kept clear of existing placeholders."""
        if protected:
            findings = [piece for f in findings for piece in _outside(f, protected)]
        findings.sort()
        merged: list[Finding] = []
        cluster: list[Finding] = []
        end = -1
        for finding in findings:
            if cluster and finding.start >= end:
                merged.append(self._one(cluster, end))
                cluster = []
            end = max(end, finding.end) if cluster else finding.end
            cluster.append(finding)
        if cluster:
            merged.append(self._one(cluster, end))
        return merged

    def _one(self, cluster: list[Finding], end: int) -> Finding:
        best = min(cluster, key=lambda f: (self._rank[f.kind], f.start - f.end))
        return Finding(cluster[0].start, end, best.kind)


def _gate_set(detectors: Sequence[Detector]) -> tuple[re2.Set, list[int | None]]:
    """One RE2 set of every detector's gate, and each detector's index in it (None: ungated)."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PATTERN_MEMORY * 8
    gates = re2.Set.SearchSet(options)
    gates.Add("")  # the sentinel: index 0, matches every text
    indices = [None if d.gate is None else gates.Add(d.gate) for d in detectors]
    gates.Compile()
    return gates, indices


def _in_source(folded: Folded, finding: Finding) -> Finding:
    if folded.offsets is None:
        return finding
    return Finding(*folded.span(finding.start, finding.end), finding.kind)


def _in_input(passes: list[list[Finding]]) -> tuple[Finding, ...]:
    """Every pass's replaced spans in the offsets of the text the first pass read.

    A later pass never cuts an earlier placeholder (``_outside``), so its spans map back whole.
    """
    found: list[Finding] = []
    for index, spans in enumerate(passes):
        for earlier in reversed(passes[:index]):
            spans = [Finding(*_before(f.start, f.end, earlier), f.kind) for f in spans]
        found.extend(spans)
    return tuple(sorted(found))


def _before(start: int, end: int, replaced: list[Finding]) -> tuple[int, int]:
    """The span ``[start, end)`` of a text had ``replaced`` not been replaced by placeholders."""
    shift = 0
    old_start, old_end = start, end
    for s, e, kind in replaced:
        new_s = s + shift
        length = len(placeholder(kind))
        if new_s + length <= start:
            old_start = start - shift - length + (e - s)
        if new_s + length <= end:
            old_end = end - shift - length + (e - s)
        shift += length - (e - s)
    return old_start, old_end


def _placeholders(text: str) -> list[tuple[int, int]]:
    if _PLACEHOLDER_MARK not in text:
        return []
    return [match.span() for match in _PLACEHOLDER.finditer(text)]


def _outside(finding: Finding, protected: list[tuple[int, int]]) -> Iterator[Finding]:
    """The parts of ``finding`` that lie outside every placeholder span."""
    start = finding.start
    for p_start, p_end in protected:
        if p_end <= start:
            continue
        if p_start >= finding.end:
            break
        if p_start > start:
            yield Finding(start, p_start, finding.kind)
        start = max(start, p_end)
    if start < finding.end:
        yield Finding(start, finding.end, finding.kind)


def _replace(text: str, spans: list[Finding]) -> str:
    parts = []
    position = 0
    for start, end, kind in spans:
        parts.append(text[position:start])
        parts.append(placeholder(kind))
        position = end
    parts.append(text[position:])
    return "".join(parts)
