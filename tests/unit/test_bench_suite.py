"""The performance suite's logic (bench/): cold-start parsing, result assembly, the Markdown,
the generated sections of BENCHMARKS.md, quality.json merging and the plots. No benchmark runs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.append(str(BENCH))  # appended: the scripts import each other by file name

import coldstart  # noqa: E402
import plots  # noqa: E402
import quality_results  # noqa: E402
import report  # noqa: E402
import suite  # noqa: E402

IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   _io
import time:        80 |        200 | encodings
import time:       500 |        500 |     pydantic_core
import time:      1500 |       2000 |   pydantic
import time:       300 |       2300 | fastapi
import time:        50 |         50 |   mangum.types
import time:       250 |        300 | mangum
import time:      4000 |       6600 | app
some other line a module printed
"""


def stats(p50: float, p95: float) -> dict[str, float]:
    return {"p50": p50, "p95": p95, "p99": p95, "mean": p50}


def latest(benches: dict[str, dict], earlier: dict[str, dict] | None = None) -> dict:
    return suite.assemble(
        machine={
            "cpu": "Test CPU",
            "cores": 2,
            "memory_gib": 4.0,
            "os": "Linux",
            "python": "3.11.7",
            "postgresql": "postgres (PostgreSQL) 18.6",
        },
        load_start=(1.234, 0.5, 0.25),
        load_end=(2.0, 1.0, 0.5),
        benches=benches,
        earlier=earlier or {},
        mode="quick",
        command="bench/suite.py --quick",
        git="abc1234",
        date="2026-11-30T01:02:03Z",
        seconds=12.345,
    )


RUN = {"mode": "quick", "date": "2026-11-30T01:02:03Z", "load_average_1min": [1.5, 2.25]}
RETRIEVE = {
    "command": "bench/retrieve.py --sizes 2000,10000",
    **RUN,
    "seconds": 80.0,
    "returncode": 0,
    "results": {
        "queries": 20,
        "dims": 384,
        "rows": [
            {
                "chunks": chunks,
                "backend": backend,
                "mode": mode,
                "bare": stats(10, 20),
                "handler": stats(15, 30 if chunks == 10_000 else 25),
                "overhead_ms": 5.0,
            }
            for chunks in (2_000, 10_000)
            for backend in ("exact", "pgvector")
            for mode in ("hybrid", "full-text")
        ],
    },
}
COLDSTART = {
    "command": "bench/coldstart.py --runs 2",
    **RUN,
    "seconds": 40.0,
    "returncode": 0,
    "results": {
        "runs": 2,
        "python": "3.11.7",
        "interpreter": {"import_ms": 0.0, "wall_ms": 20.0, "slowest": []},
        "fastapi_mangum": {"import_ms": 400.0, "wall_ms": 450.0, "slowest": []},
        "functions": [
            {
                "function": "RetrieveFunction",
                "module": "app",
                "import_ms": 800.0,
                "wall_ms": 900.0,
                "baseline_import_ms": 400.0,
                "slowest": [["psycopg", 60.0], ["fastapi.routing", 30.0]],
            },
            {
                "function": "MigrateFunction",
                "module": "app",
                "import_ms": 300.0,
                "wall_ms": 380.0,
                "baseline_import_ms": 500.0,
                "slowest": [["context_ledger.settings", 50.0]],
            },
        ],
    },
}
RELEVANT = {
    "command": "bench/relevant.py --sizes 1000,5000",
    **RUN,
    "seconds": 30.0,
    "returncode": 0,
    "results": {
        "queries": 20,
        "rows": [
            {
                "memories": size,
                "candidates": size,
                "mode": mode,
                "bare": stats(5, 9),
                "handler": stats(8, 12),
                "overhead_ms": 3.0,
            }
            for size in (1_000, 5_000)
            for mode in ("query", "cold", "empty")
        ],
    },
}
FAILED = {
    "command": "bench/gateway.py --calls 50",
    **RUN,
    "seconds": 7.0,
    "returncode": 1,
    "error": "RuntimeError: gateway answered 401",
}
QUALITY = [
    {"dataset": "scifact", "config": config, "backend": "exact", "queries": 300,
     "metrics": {"ndcg_cut_10": ndcg, "recall_100": 0.9, "recip_rank": 0.6},
     "measured": measured}
    for config, ndcg, measured in (
        ("full-text", 0.693, {"date": "2026-11-30T01:00:00Z", "git": "abc1234",
                              "query_limit": None}),
        ("minilm", 0.735, {"source": "recorded: README.md"}),
    )
]  # fmt: skip


# --- cold start ---------------------------------------------------------------------------------


def test_importtime_lines_are_parsed_with_their_nesting_and_other_lines_skipped():
    lines = coldstart.parse_importtime(IMPORTTIME)

    assert [line.module for line in lines] == [
        "_io", "encodings", "pydantic_core", "pydantic", "fastapi", "mangum.types", "mangum", "app",
    ]  # fmt: skip
    assert lines[2] == coldstart.ImportLine("pydantic_core", 2, 500, 500)
    assert [line.depth for line in lines if line.depth == 0] == [0, 0, 0, 0]


def test_imported_time_is_the_cumulative_time_of_the_named_top_level_imports():
    lines = coldstart.parse_importtime(IMPORTTIME)

    assert coldstart.imported_us(lines, ["app"]) == 6600
    assert coldstart.imported_us(lines, ["fastapi", "mangum"]) == 2600
    assert coldstart.imported_us(lines, []) == 0


def test_a_module_missing_from_the_output_is_an_error_not_a_zero():
    with pytest.raises(ValueError, match="pydantic"):
        coldstart.imported_us(coldstart.parse_importtime(IMPORTTIME), ["pydantic"])


def test_slowest_modules_rank_the_median_own_time_over_runs():
    first = coldstart.parse_importtime(IMPORTTIME)
    second = coldstart.parse_importtime(IMPORTTIME.replace("1500 |", "9500 |"))
    third = coldstart.parse_importtime(IMPORTTIME.replace("4000 |", "100 |"))

    slowest = coldstart.slowest_modules([first, second, third], 3)

    assert slowest == [("app", 4.0), ("pydantic", 1.5), ("pydantic_core", 0.5)]


# --- the machine and the assembled results ------------------------------------------------------


def test_machine_facts_are_read_from_proc_text():
    cpuinfo = (
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n"
    )

    assert suite.cpu_model(cpuinfo) == "Intel(R) Xeon(R) Processor"
    assert suite.memory_gib("MemTotal:       24641536 kB\nMemFree: 1 kB\n") == pytest.approx(23.5)
    assert suite.memory_gib("") is None


def test_assembled_results_hold_the_run_the_machine_and_each_bench():
    assembled = latest({"retrieve": RETRIEVE, "gateway": FAILED})

    assert assembled["machine"]["load_average_start"] == [1.23, 0.5, 0.25]
    assert assembled["machine"]["cpu"] == "Test CPU"
    assert assembled["seconds"] == 12.3
    assert (assembled["mode"], assembled["git"]) == ("quick", "abc1234")
    assert set(assembled["benches"]) == {"retrieve", "gateway"}
    json.dumps(assembled)  # latest.json


def test_a_partial_run_keeps_the_earlier_records_of_benches_it_did_not_run():
    earlier = {"gateway": FAILED, "retrieve": dict(RETRIEVE, seconds=1.0)}

    assembled = latest({"retrieve": RETRIEVE}, earlier)

    assert assembled["benches"] == {"gateway": FAILED, "retrieve": RETRIEVE}


def test_plots_are_linked_relative_to_the_page_that_shows_them():
    plots = Path("/repo/docs/benchmarks")

    assert suite.relative(plots, Path("/repo")) == "docs/benchmarks"
    assert suite.relative(plots, Path("/repo/bench/results")) == "../../docs/benchmarks"


def test_only_selects_known_benchmarks_in_suite_order():
    assert [b.name for b in suite.select("gateway,coldstart")] == ["coldstart", "gateway"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown benchmark nope"):
        suite.select("nope")


# --- Markdown -----------------------------------------------------------------------------------


def test_retrieve_rows_pair_the_handler_with_its_bare_sql_and_their_p95_ratio():
    markdown = report.retrieve_section(RETRIEVE["results"])

    assert "| 10,000 | pgvector | hybrid | 10.0 / 20.0 | 15.0 / 30.0 | 5.0 | 1.50x |" in markdown
    assert "| 2,000 | exact | full-text | 10.0 / 20.0 | 15.0 / 25.0 | 5.0 | 1.25x |" in markdown


def test_retrieve_figures_say_the_hnsw_candidate_list_they_were_measured_with():
    with_setting = dict(RETRIEVE["results"], ef_search=200)

    assert "pgvector rows at `hnsw.ef_search` 200." in report.retrieve_section(with_setting)
    assert "ef_search" not in report.retrieve_section(RETRIEVE["results"])  # older records


def test_cold_start_rows_compare_each_function_with_the_baseline_measured_beside_it():
    markdown = report.coldstart_section(COLDSTART["results"])

    retrieve = (
        "| RetrieveFunction | 800.0 | 900.0 | 400.0 | 2.00x | `psycopg` 60.0, `fastapi.routing`"
    )
    assert retrieve in markdown
    assert "| MigrateFunction | 300.0 | 380.0 | 500.0 | 0.60x |" in markdown
    web = "| `import fastapi, mangum` (baseline, all runs) | 400.0 | 450.0 | 400.0 | 1.00x |  |"
    assert web in markdown


def test_a_failed_bench_reports_its_error_instead_of_figures():
    body = report.bench_body("gateway", FAILED)

    assert body.startswith(
        "`bench/gateway.py --calls 50` (quick run): 7 s from 2026-11-30 01:02 UTC,"
        " load average 1.5/2.2 (start/end)."
    )
    assert "**Failed** (exit 1)" in body
    assert "RuntimeError: gateway answered 401" in body


def test_the_report_has_a_section_per_bench_run_and_quality_when_present():
    run = latest({"retrieve": RETRIEVE, "gateway": FAILED})

    markdown = report.render_report(run, QUALITY, "../plots")

    assert markdown.startswith("# Benchmark report\n")
    for title in ("Machine and run", "Retrieve latency", "Model gateway overhead"):
        assert f"\n## {title}\n" in markdown
    assert "| scifact | minilm | exact | 300 | 0.735 | 0.900 | 0.600 | recorded: README.md |" in (
        markdown
    )
    assert (
        "| scifact | full-text | exact | 300 | 0.693 | 0.900 | 0.600 | 2026-11-30, `abc1234` |"
        in (markdown)
    )
    assert "Evidence chain" not in markdown


def test_sections_with_figures_show_their_plot_and_failed_ones_none():
    run = latest({"retrieve": RETRIEVE, "relevant": dict(FAILED, command="bench/relevant.py")})

    bodies = report.sections(run, QUALITY, "docs/benchmarks")

    assert bodies["retrieve"].endswith(
        "\n\n![retrieve latency against corpus size](docs/benchmarks/retrieve.png)"
    )
    assert bodies["quality"].endswith("(docs/benchmarks/quality.png)")
    assert ".png" not in bodies["relevant"]
    assert ".png" not in bodies["machine"]


def test_quality_targets_say_met_missed_or_not_measured():
    markdown = report.quality_targets(QUALITY)

    assert "| scifact full-text ≥ 0.686: BM25 (bm25s) offline | 0.693 | yes |" in markdown
    assert "| scifact minilm ≥ 0.733: the best offline fusion | 0.735 | yes |" in markdown
    assert "| cosqa minilm ≥ 0.593: MiniLM dense alone, offline | — | not measured |" in markdown
    lower = [dict(QUALITY[1], metrics={**QUALITY[1]["metrics"], "ndcg_cut_10": 0.7})]
    assert "| 0.700 | no |" in report.quality_targets(lower)


def test_a_generated_section_is_replaced_between_its_markers_and_nothing_else_changes():
    text = (
        "# Title\n\nhand-written\n\n<!-- generated:retrieve -->\nold table\n"
        "<!-- /generated:retrieve -->\n\nmore hand-written\n"
    )

    once = report.replace_section(text, "retrieve", "new table\n")
    twice = report.replace_section(once, "retrieve", "new table\n")

    assert once == (
        "# Title\n\nhand-written\n\n<!-- generated:retrieve -->\n\nnew table\n\n"
        "<!-- /generated:retrieve -->\n\nmore hand-written\n"
    )
    assert twice == once


def test_a_section_without_markers_is_appended_with_them():
    assert report.replace_section("# Title\n", "dlp", "figures") == (
        "# Title\n\n<!-- generated:dlp -->\n\nfigures\n\n<!-- /generated:dlp -->\n"
    )


def test_updating_the_document_keeps_the_sections_of_benches_not_in_the_run():
    document = (
        "<!-- generated:machine -->\n<!-- /generated:machine -->\n"
        "<!-- generated:chain -->\nearlier chain figures\n<!-- /generated:chain -->\n"
        "<!-- generated:retrieve -->\n<!-- /generated:retrieve -->\n"
    )

    updated = report.update_document(document, latest({"retrieve": RETRIEVE}), [], "plots")

    assert "earlier chain figures" in updated
    assert "| 10,000 | exact | hybrid |" in updated
    assert "| CPU | Test CPU, 2 cores |" in updated


# --- quality.json -------------------------------------------------------------------------------


def test_quality_rows_replace_those_of_the_same_configuration_and_keep_the_others(tmp_path):
    path = tmp_path / "results" / "quality.json"
    old = [dict(row, measured=None) for row in QUALITY]
    quality_results.record_quality(old, {"source": "recorded"}, path)
    newer = dict(QUALITY[0], metrics={"ndcg_cut_10": 0.7, "recall_100": 0.9, "recip_rank": 0.6})

    quality_results.record_quality([newer], {"date": "2026-12-01T00:00:00Z"}, path)

    rows = quality_results.load_quality(path)
    assert [(r["config"], r["metrics"]["ndcg_cut_10"], r["measured"]) for r in rows] == [
        ("full-text", 0.7, {"date": "2026-12-01T00:00:00Z"}),
        ("minilm", 0.735, {"source": "recorded"}),
    ]


def test_no_quality_file_means_no_rows(tmp_path):
    assert quality_results.load_quality(tmp_path / "quality.json") == []


# --- plots --------------------------------------------------------------------------------------


def test_plots_are_png_files_for_the_benches_the_run_holds(tmp_path):
    run = latest({"retrieve": RETRIEVE, "relevant": RELEVANT, "coldstart": COLDSTART,
                  "gateway": FAILED})  # fmt: skip

    written = plots.render_plots(run, QUALITY, tmp_path)

    assert sorted(path.name for path in written) == [
        "coldstart.png", "quality.png", "relevant.png", "retrieve.png",
    ]  # fmt: skip
    for path in written:
        assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
        assert path.stat().st_size > 5_000


def test_no_figures_no_plots(tmp_path):
    assert plots.render_plots(latest({"gateway": FAILED}), [], tmp_path) == []
    assert list(tmp_path.iterdir()) == []
