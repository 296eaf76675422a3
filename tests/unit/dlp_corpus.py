"""Scoring the redactor on the independent labelled corpus (``tests/fixtures/dlp_corpus``).

Shared by the floor test (``test_dlp_corpus.py``) and ``bench/dlp.py``. The corpus is written by
someone who does not read the detectors; its labels are values, each occurring verbatim in its
document, every occurrence carrying the label. Scored on the redaction's spans in the input
(``Redaction.findings``), so a value counts as caught only when every occurrence of it is
covered end to end, and a finding that merely shortens a secret does not:

- recall: positives whose every occurrence is fully covered by redactions, over all positives;
- precision: findings that overlap a positive, over findings that overlap a positive or no
  label at all (findings that touch only an ambiguous value are left out, as those values are);
- negatives touched: negatives any occurrence of which overlaps a finding.

Kinds are the corpus's coarse ones (``password``, ``api_key``...), whatever the detector called
its finding: any redaction counts for recall.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from context_ledger.dlp.detectors import Finding
from context_ledger.dlp.redaction import Redactor

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "dlp_corpus" / "corpus.jsonl"
SECRET_KINDS = frozenset(
    {"password", "api_key", "token", "private_key", "connection_string", "cloud_key"}
)


def load_corpus(path: Path = CORPUS) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def occurrences(text: str, value: str) -> Iterator[tuple[int, int]]:
    start = text.find(value)
    while start != -1 and value:
        yield start, start + len(value)
        start = text.find(value, start + 1)


def covered(span: tuple[int, int], findings: Iterable[Finding]) -> bool:
    """Whether the findings (sorted, disjoint) cover every character of ``span``."""
    position, end = span
    for finding in findings:
        if finding.start > position:
            break
        position = max(position, finding.end)
        if position >= end:
            return True
    return position >= end


def overlaps(finding: Finding, span: tuple[int, int]) -> bool:
    return finding.start < span[1] and span[0] < finding.end


@dataclass
class Tally:
    """Caught / total per group (a kind or a source)."""

    caught: Counter[str] = field(default_factory=Counter)
    total: Counter[str] = field(default_factory=Counter)

    def add(self, group: str, hit: bool) -> None:
        self.total[group] += 1
        self.caught[group] += hit

    def rate(self, groups: Iterable[str] | None = None) -> float:
        keys = list(self.total) if groups is None else [g for g in groups if g in self.total]
        total = sum(self.total[g] for g in keys)
        return sum(self.caught[g] for g in keys) / total if total else 1.0


@dataclass
class Score:
    """The corpus's figures; ``missed`` and ``touched`` name the failures for a reader."""

    documents: int = 0
    recall_by_kind: Tally = field(default_factory=Tally)
    recall_by_source: Tally = field(default_factory=Tally)
    negatives_by_kind: Tally = field(default_factory=Tally)
    negatives_by_source: Tally = field(default_factory=Tally)
    true_findings: Counter[str] = field(default_factory=Counter)
    false_findings: Counter[str] = field(default_factory=Counter)
    missed: list[tuple[str, str, str]] = field(default_factory=list)
    touched: list[tuple[str, str, str]] = field(default_factory=list)
    false_positives: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def recall(self) -> float:
        return self.recall_by_kind.rate()

    @property
    def secret_recall(self) -> float:
        return self.recall_by_kind.rate(SECRET_KINDS)

    @property
    def precision(self) -> float:
        true, false = sum(self.true_findings.values()), sum(self.false_findings.values())
        return true / (true + false) if true + false else 1.0

    def precision_of(self, source: str) -> float:
        true, false = self.true_findings[source], self.false_findings[source]
        return true / (true + false) if true + false else 1.0

    @property
    def negatives_touched(self) -> int:
        return sum(self.negatives_by_kind.caught.values())


def score(corpus: list[dict], redactor: Redactor) -> Score:
    result = Score(documents=len(corpus))
    for document in corpus:
        text, source = document["text"], document["source"]
        findings = list(redactor.redact(text).findings)
        positive_spans = []
        for label in document["positives"]:
            spans = list(occurrences(text, label["value"]))
            positive_spans.extend(spans)
            hit = bool(spans) and all(covered(span, findings) for span in spans)
            result.recall_by_kind.add(label["kind"], hit)
            result.recall_by_source.add(source, hit)
            if not hit:
                result.missed.append((document["id"], label["kind"], label["value"]))
        for label in document["negatives"]:
            spans = list(occurrences(text, label["value"]))
            hit = any(overlaps(f, span) for f in findings for span in spans)
            result.negatives_by_kind.add(label["kind"], hit)
            result.negatives_by_source.add(source, hit)
            if hit:
                result.touched.append((document["id"], label["kind"], label["value"]))
        ambiguous_spans = [
            span for label in document["ambiguous"] for span in occurrences(text, label["value"])
        ]
        for finding in findings:
            if any(overlaps(finding, span) for span in positive_spans):
                result.true_findings[source] += 1
            elif not any(overlaps(finding, span) for span in ambiguous_spans):
                result.false_findings[source] += 1
                result.false_positives.append(
                    (document["id"], finding.kind, text[finding.start : finding.end])
                )
    return result
