"""``bench/results/quality.json``: the latest retrieval-quality row of each configuration.

``quality.py`` merges every run's rows into the file, one row per (dataset, configuration,
backend), the newest replacing the older; rows it did not rerun stay. So a quick MiniLM run does
not erase the full-text rows, and the suite's plots and BENCHMARKS.md read the latest figure of
each configuration. Each row says how it was measured (date, git revision, command, queries).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

QUALITY_RESULTS = Path(__file__).resolve().parent / "results" / "quality.json"


def row_key(row: Mapping[str, Any]) -> tuple[str, str, str]:
    return (row["dataset"], row["config"], row["backend"])


def load_quality(path: Path = QUALITY_RESULTS) -> list[dict[str, Any]]:
    """The rows of ``path``, or none when the file does not exist yet."""
    if not path.exists():
        return []
    return list(json.loads(path.read_text())["rows"])


def merge_rows(
    old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``old`` with each row of ``new`` replacing the row of the same key, sorted by key."""
    merged = {row_key(row): dict(row) for row in old}
    merged.update((row_key(row), dict(row)) for row in new)
    return [merged[key] for key in sorted(merged)]


def record_quality(
    rows: Iterable[Mapping[str, Any]], measured: Mapping[str, Any], path: Path = QUALITY_RESULTS
) -> None:
    """Merge ``rows``, each stamped with ``measured`` (how they were measured), into ``path``."""
    stamped = [{**row, "measured": dict(measured)} for row in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"rows": merge_rows(load_quality(path), stamped)}
    path.write_text(json.dumps(document, indent=2) + "\n")
