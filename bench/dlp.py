"""DLP redaction benchmark: throughput and per-kind precision/recall.

Prints:
- redaction throughput (MB/s of UTF-8 input) of ``Redactor().redact`` one document at a time
  on the labelled mixed corpus (``bench/data/dlp/sample.jsonl``, built by
  ``make_dlp_sample.py``) and on this repository's own code and docs; the baselines, measured
  in the same run on the same documents: one pass of a single regex (the floor any regex
  scanner pays) and, when installed, detect-secrets' line scanner with its default plugins;
- per kind on the labelled sample: precision (findings of that kind overlapping a label of that
  kind), recall (labels fully covered by a finding of their kind), and how many labelled items
  survive redaction at all (must be 0) and how many decoy documents had anything redacted;
- on the independent labelled corpus (``tests/fixtures/dlp_corpus/corpus.jsonl``, written by
  someone who does not read the detectors; scored by ``tests/unit/dlp_corpus.py``): recall (a
  positive counts only when every occurrence of its value is fully covered by redactions, in
  the input's offsets), precision (findings overlapping a positive over all findings, those
  touching only an ambiguous value left out) and negatives touched, per kind and per source,
  and the redactor's throughput on it.

Run: ``.venv/bin/python bench/dlp.py [--repeat N]`` (``make bench-dlp``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_support import write_results

from context_ledger.dlp.redaction import Redactor

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "unit"))

from dlp_corpus import CORPUS, SECRET_KINDS, load_corpus, score  # noqa: E402

SAMPLE = ROOT / "bench" / "data" / "dlp" / "sample.jsonl"
REPO_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".json", ".sql", ".sh", ".txt", ".go"}
_SINGLE_REGEX = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{20,}")


def load_sample() -> list[dict]:
    if not SAMPLE.exists():
        subprocess.run(["python", str(ROOT / "bench" / "make_dlp_sample.py")], check=True)
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def repo_documents() -> list[str]:
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    texts = []
    for name in files:
        path = ROOT / name
        # is_file: a tracked file deleted in the work tree is not part of it
        if path.suffix in REPO_SUFFIXES and "bench/data" not in name and path.is_file():
            texts.append(path.read_text(errors="replace"))
    return texts


def throughput(texts: list[str], scan: Callable[[str], object], repeat: int) -> float:
    size = sum(len(t.encode()) for t in texts) * repeat
    start = time.perf_counter()
    for _ in range(repeat):
        for text in texts:
            scan(text)
    return size / (time.perf_counter() - start) / 1e6


def detect_secrets_scan() -> Callable[[str], object] | None:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def scan(text: str) -> object:
        with default_settings():
            return [list(scan_line(line)) for line in text.splitlines()]

    return scan


def report_throughput(
    name: str, texts: list[str], redactor: Redactor, repeat: int
) -> dict[str, Any]:
    size = sum(len(t.encode()) for t in texts) / 1e6
    print(f"\n{name}: {len(texts)} documents, {size:.2f} MB, x{repeat}")
    redact = throughput(texts, redactor.redact, repeat)
    print(f"  redact (all detectors)      {redact:8.1f} MB/s")
    single = throughput(texts, lambda t: _SINGLE_REGEX.findall(t), repeat)
    print(f"  baseline: one regex pass     {single:8.1f} MB/s")
    ds = detect_secrets_scan()
    detect_secrets = None if ds is None else throughput(texts, ds, 1)
    if detect_secrets is not None:
        print(f"  baseline: detect-secrets     {detect_secrets:8.3f} MB/s (x1)")
    return {
        "corpus": name,
        "documents": len(texts),
        "mb": size,
        "repeat": repeat,
        "redact_mb_s": redact,
        "regex_mb_s": single,
        "detect_secrets_mb_s": detect_secrets,
    }


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def report_quality(sample: list[dict], redactor: Redactor) -> dict[str, Any]:
    tp, fp, found, total = Counter(), Counter(), Counter(), Counter()
    survived = 0
    flagged_decoy_docs = 0
    for document in sample:
        text, labels = document["text"], document["labels"]
        findings = redactor.find(text)
        for finding in findings:
            if any(
                lb["kind"] == finding.kind and _overlaps(finding[:2], (lb["start"], lb["end"]))
                for lb in labels
            ):
                tp[finding.kind] += 1
            else:
                fp[finding.kind] += 1
        if not labels and findings:
            flagged_decoy_docs += 1
        redacted = redactor.redact(text).text
        for label in labels:
            total[label["kind"]] += 1
            if any(
                f.kind == label["kind"] and f.start <= label["start"] and label["end"] <= f.end
                for f in findings
            ):
                found[label["kind"]] += 1
            if text[label["start"] : label["end"]] in redacted:
                survived += 1
    print(f"\nlabelled sample: {len(sample)} documents, {sum(total.values())} planted items")
    print(f"  {'kind':<18} {'labels':>6} {'precision':>9} {'recall':>7} {'FP':>4}")
    kinds = []
    for kind in sorted(set(total) | set(fp)):
        flagged = tp[kind] + fp[kind]
        precision = tp[kind] / flagged if flagged else float("nan")
        recall = found[kind] / total[kind] if total[kind] else float("nan")
        print(f"  {kind:<18} {total[kind]:>6} {precision:>9.3f} {recall:>7.3f} {fp[kind]:>4}")
        kinds.append(
            {
                "kind": kind,
                "labels": total[kind],
                "precision": precision if flagged else None,
                "recall": recall if total[kind] else None,
                "false_positives": fp[kind],
            }
        )
    all_fp = sum(fp.values())
    all_tp = sum(tp.values())
    overall_precision = all_tp / (all_tp + all_fp)
    overall_recall = sum(found.values()) / sum(total.values())
    print(f"  overall precision {overall_precision:.3f}, recall {overall_recall:.3f}")
    print(f"  planted items surviving redaction: {survived}")
    print(f"  documents without plants that had something redacted: {flagged_decoy_docs}")
    return {
        "documents": len(sample),
        "planted": sum(total.values()),
        "kinds": kinds,
        "precision": overall_precision,
        "recall": overall_recall,
        "survived": survived,
        "flagged_decoy_documents": flagged_decoy_docs,
    }


def report_corpus(redactor: Redactor) -> dict[str, Any] | None:
    if not CORPUS.exists():
        print(f"\nindependent corpus: {CORPUS} not found, skipped")
        return None
    corpus = load_corpus(CORPUS)
    result = score(corpus, redactor)
    kinds, sources = result.recall_by_kind, result.recall_by_source
    negatives = sum(result.negatives_by_kind.total.values())
    print(
        f"\nindependent corpus: {len(corpus)} documents, {sum(kinds.total.values())} positives, "
        f"{negatives} negatives"
    )
    print(
        f"  recall {result.recall:.3f} (secrets {result.secret_recall:.3f}), precision "
        f"{result.precision:.3f}, negatives touched {result.negatives_touched}"
    )
    print(f"  {'kind':<18} {'positives':>9} {'recall':>7}")
    for kind in sorted(kinds.total):
        secret = " (secret)" if kind in SECRET_KINDS else ""
        print(f"  {kind:<18} {kinds.total[kind]:>9} {kinds.rate([kind]):>7.3f}{secret}")
    print(f"  {'source':<18} {'positives':>9} {'recall':>7} {'precision':>9} {'negatives':>9}")
    for source in sorted(set(sources.total) | set(result.negatives_by_source.total)):
        touched = result.negatives_by_source.caught[source]
        of = result.negatives_by_source.total[source]
        print(
            f"  {source:<18} {sources.total[source]:>9} {sources.rate([source]):>7.3f} "
            f"{result.precision_of(source):>9.3f} {touched:>4}/{of:<4}"
        )
    for label, items in (("missed", result.missed), ("touched", result.touched)):
        for document, kind, value in items:
            print(f"  {label}: {document} {kind} {value[:60]!r}")
    return {
        "documents": len(corpus),
        "recall": result.recall,
        "secret_recall": result.secret_recall,
        "precision": result.precision,
        "negatives_touched": result.negatives_touched,
        "negatives": negatives,
        "recall_by_kind": {kind: kinds.rate([kind]) for kind in kinds.total},
        "recall_by_source": {source: sources.rate([source]) for source in sources.total},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the figures here (bench/suite.py)")
    args = parser.parse_args()
    redactor = Redactor()
    sample = load_sample()
    throughputs = [
        report_throughput("mixed corpus", [d["text"] for d in sample], redactor, args.repeat),
        report_throughput("this repository", repo_documents(), redactor, args.repeat),
    ]
    if CORPUS.exists():
        texts = [d["text"] for d in load_corpus(CORPUS)]
        throughputs.append(report_throughput("independent corpus", texts, redactor, args.repeat))
    quality = report_quality(sample, redactor)
    corpus = report_corpus(redactor)
    write_results(args.json, {"throughput": throughputs, "quality": quality, "corpus": corpus})


if __name__ == "__main__":
    main()
