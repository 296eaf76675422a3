"""Issue 27's quality table (bench/report.py): the API's rows beside the offline references of the
same run, the differences its criteria read marked met or not, the model comparison, and where
``make eval`` writes them. No dataset, no model: rows as quality.json holds them."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))

import report  # noqa: E402

MEASURED = {"date": "2026-12-02T20:00:00Z", "git": "abc1234", "command": "bench/quality.py",
            "query_limit": None}  # fmt: skip


def row(dataset: str, config: str, backend: str, ndcg: float, **extra: object) -> dict:
    return {
        "dataset": dataset,
        "config": config,
        "backend": backend,
        "queries": 52,
        "metrics": {"ndcg_cut_10": ndcg, "recall_100": 0.8, "recip_rank": 0.7},
        "query_ms_p50": 40.0,
        "extra": {"query_words": 14.5, **extra},
        "measured": MEASURED,
    }


ROWS = [
    row("cacm", "full-text", "exact", 0.484),
    row("cacm", "minilm", "exact", 0.569, model="all-MiniLM-L6-v2", ingest_embedded=3206,
        ingest_model_seconds=250.0),
    row("cacm", "bm25s", "offline", 0.499),
    row("cacm", "dense", "offline", 0.439, model="all-MiniLM-L6-v2", dimensions=384),
    row("cacm", "fusion", "offline", 0.574, model="all-MiniLM-L6-v2", dimensions=384),
    row("scifact", "full-text", "exact", 0.700),
    row("scifact", "minilm", "exact", 0.640, model="all-MiniLM-L6-v2"),
    row("scifact", "bm25s", "offline", 0.686),
    row("scifact", "dense", "offline", 0.645, dimensions=384),
    row("scifact", "fusion", "offline", 0.733, dimensions=384),
    row("scifact", "minilm", "pgvector", 0.1),  # another backend: not in the exact table
    row("cacm", "bm25-index", "offline", 0.4844),
]  # fmt: skip


def lines_of(markdown: str, start: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith(start)]


def test_a_difference_is_met_unless_more_than_a_hundredth_below():
    assert report.difference(0.484, 0.499) == "-0.015 **not met**"
    assert report.difference(0.489, 0.499) == "-0.010 met"
    assert report.difference(0.700, 0.686) == "+0.014 met"  # above its reference: met
    assert report.difference(None, 0.5) == "— not measured"
    assert report.difference(0.488, 0.499) == "-0.011 **not met**"


def test_the_table_has_a_row_per_dataset_and_model_with_the_three_criteria():
    markdown = report.criteria_table(ROWS)

    (cacm,) = lines_of(markdown, "| cacm |")
    assert cacm == (
        "| cacm | 52 (14.5 words) | all-MiniLM-L6-v2 (`minilm`) | 0.484 / 0.800 | 0.484 / 0.800"
        " | +0.000 met | 0.499 / 0.800 | -0.015 **not met** | 0.439 / 0.800 | 0.569 / 0.800"
        " | 0.574 / 0.800 | -0.005 met | +0.085 met |"
    )
    (scifact,) = lines_of(markdown, "| scifact |")
    # hybrid .640 against the better part, full-text .700: .060 below
    assert scifact.endswith("| +0.014 met | 0.645 / 0.800 | 0.640 / 0.800 | 0.733 / 0.800"
                            " | -0.093 **not met** | -0.060 **not met** |")  # fmt: skip
    assert "| full-text - bm25s | dense | hybrid (API) | fusion | hybrid - fusion |" in markdown
    assert "| full-text (API) | bm25-index | full-text - bm25-index | bm25s |" in markdown


def test_a_dataset_without_references_or_a_model_says_not_measured():
    rows = [row("cosqa", "full-text", "exact", 0.423)]

    (cosqa,) = lines_of(report.criteria_table(rows), "| cosqa |")

    assert cosqa == (
        "| cosqa | 52 (14.5 words) | — | 0.423 / 0.800 | — | — not measured | — | — not measured"
        " | — | — | — | — not measured | — not measured |"
    )


def test_each_model_gets_its_own_rows_and_references():
    rows = [
        *ROWS[:5],
        row("cacm", "hashing", "exact", 0.30, model="hashing-384"),
        row("cacm", "dense-hashing", "offline", 0.20, dimensions=384),
        row("cacm", "fusion-hashing", "offline", 0.45, dimensions=384),
    ]

    markdown = report.criteria_table(rows)

    assert len(lines_of(markdown, "| cacm |")) == 2
    (hashing,) = [line for line in lines_of(markdown, "| cacm |") if "hashing-384" in line]
    assert "| 0.200 / 0.800 | 0.300 / 0.800 | 0.450 / 0.800 | -0.150 **not met** |" in hashing


def test_the_model_comparison_shows_quality_per_dataset_and_the_costs():
    embeddings = {"rows": {"numpy": {"docs_per_s": 12.24, "cold_start_s": 0.364,
                                     "peak_rss_mb": 261.0}}}  # fmt: skip

    markdown = report.models_table(ROWS, embeddings)

    assert "| model | dims | cacm: hybrid / dense nDCG@10 | scifact: hybrid / dense nDCG@10 |" in (
        markdown
    )
    (minilm,) = lines_of(markdown, "| all-MiniLM-L6-v2")
    assert minilm == (
        "| all-MiniLM-L6-v2 (`minilm`) | 384 | 0.569 / 0.439 | 0.640 / 0.645 | 40 / 40"
        " | 3,206 texts, 250 s | 12.2 docs/s, 0.36 s, 261 MB |"
    )
    assert "| all from the cache | — |" in report.models_table(ROWS[5:])
    assert report.models_table(ROWS[:1]) == (
        "No embeddings configuration measured with its references."
    )


def test_a_figure_from_another_run_than_the_datasets_full_text_says_when_it_was_measured():
    older = {"date": "2026-11-30T12:00:00Z", "git": "1e2c6cc", "query_limit": None}
    rows = [ROWS[5], ROWS[7], dict(row("scifact", "minilm", "exact", 0.736), measured=older)]

    (scifact,) = lines_of(report.criteria_table(rows), "| scifact |")

    assert "| 0.736 / 0.800 (2026-11-30, `1e2c6cc`) |" in scifact
    assert "| 0.700 / 0.800 | — | — not measured | 0.686 / 0.800 |" in scifact


def test_the_section_says_how_its_rows_were_measured_and_leaves_other_backends_out():
    markdown = report.criteria_section(ROWS)

    assert "Measured: 2026-12-02, `abc1234`: `bench/quality.py`." in markdown
    assert "0.100" not in markdown
    assert report.criteria_section([]) == "Not measured yet (`make eval`)."


def test_the_quality_section_of_benchmarks_md_leads_with_the_table():
    body = report.quality_body(ROWS, None, "docs/benchmarks")

    assert body.index("| full-text - bm25s |") < body.index("Every row:")
    assert body.endswith("(docs/benchmarks/quality.png)")
    assert "| scifact | minilm | pgvector | 52 | 0.100 |" in body


def test_make_eval_rewrites_the_quality_sections_and_leaves_the_rest(tmp_path):
    document = tmp_path / "BENCHMARKS.md"
    document.write_text(
        "# B\n\n<!-- generated:retrieve -->\nkept\n<!-- /generated:retrieve -->\n\n"
        "<!-- generated:quality -->\nstale figures\n<!-- /generated:quality -->\n"
    )
    page = tmp_path / "docs" / "retrieval.md"
    page.parent.mkdir()
    page.write_text("# Retrieval\n\nhand-written\n")

    import quality

    written = quality.update_documents(
        ROWS, None, document=document, page=page, plots=tmp_path / "docs" / "benchmarks"
    )

    assert [path.name for path in written] == ["quality.png", "BENCHMARKS.md", "retrieval.md"]
    text = document.read_text()
    assert "kept" in text
    assert "stale figures" not in text
    assert "![nDCG@10 per configuration and dataset](docs/benchmarks/quality.png)" in text
    updated = page.read_text()
    assert updated.startswith("# Retrieval\n\nhand-written\n\n<!-- generated:quality-criteria -->")
    assert "| cacm | 52 (14.5 words) |" in updated


def test_reference_rows_are_named_for_their_model():
    import reference

    assert reference.reference_configs("minilm") == ("dense", "fusion")
    assert reference.reference_configs("hashing") == ("dense-hashing", "fusion-hashing")


def test_full_text_rows_query_the_first_build_with_vectors():
    import quality

    assert quality.plan(["full-text", "minilm"]) == [("minilm", ["full-text", "minilm"])]
    assert quality.plan(["full-text", "hashing", "minilm"]) == [
        ("hashing", ["full-text", "hashing"]),
        ("minilm", ["minilm"]),
    ]
    assert quality.plan(["full-text"]) == [("full-text", ["full-text"])]
    assert quality.plan(["minilm"]) == [("minilm", ["minilm"])]
    assert quality.DEFAULT_CONFIGS == ["full-text", "minilm"]
    assert [d.rsplit("/", 1)[-1] for d in quality.DEFAULT_DATASETS] == [
        "scifact:docs", "cosqa:codebase", "cacm:docs",
    ]  # fmt: skip


def test_a_default_dataset_may_be_named_instead_of_its_path():
    import quality

    path, kind = quality.parse_dataset("cosqa")
    assert (path.name, path.parent.name, kind) == ("cosqa", "data", "codebase")
    assert quality.parse_dataset("cacm")[1] == "docs"
    assert quality.parse_dataset("some/folder:codebase") == (Path("some/folder"), "codebase")
