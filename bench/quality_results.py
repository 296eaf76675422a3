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

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
QUALITY_RESULTS = BENCH / "results" / "quality.json"
#: The page that shows issue 27's table (between its generated:quality-criteria markers), in its
#: Quality section.
CRITERIA_PAGE = REPO / "docs" / "retrieval.md"
CRITERIA_SECTION = "quality-criteria"


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


def embeddings_bench(latest: Path = BENCH / "results" / "latest.json") -> dict[str, Any] | None:
    """The embeddings bench's results in the suite's latest run (the models' costs), if any."""
    if not latest.exists():
        return None
    record = json.loads(latest.read_text()).get("benches", {}).get("embeddings", {})
    return record.get("results")
