"""The suite's Markdown: one section per benchmark, each figure next to its same-run baseline.

``render_report`` writes ``bench/results/latest.md``; ``update_document`` puts the same sections
into ``BENCHMARKS.md`` between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``,
leaving the hand-written text around them as it is. A section whose benchmark was not part of the
run (``bench/suite.py --only``) keeps what it held.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reference import REFERENCE_BACKEND, reference_configs

Figures = Mapping[str, Any]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def ms(value: float) -> str:
    return f"{value:,.1f}"


def pair(stats: Figures) -> str:
    """``p50 / p95`` of a latency summary, in ms."""
    return f"{ms(stats['p50'])} / {ms(stats['p95'])}"


def ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}x" if baseline else "—"


def rate(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


# --- sections -------------------------------------------------------------------------------------


def machine_section(latest: Figures) -> str:
    m = latest["machine"]
    load = m["load_average_start"], m["load_average_end"]
    memory = f"{m['memory_gib']:.1f} GiB" if m.get("memory_gib") else "—"
    rows = [
        ("date (UTC)", latest["date"]),
        ("command", f"`{latest['command']}` ({latest['mode']} run, {latest['seconds']:.0f} s)"),
        ("git revision", f"`{latest['git']}`"),
        ("CPU", f"{m['cpu']}, {m['cores']} cores"),
        ("memory", memory),
        ("OS", m["os"]),
        ("Python", m["python"]),
        ("PostgreSQL", m.get("postgresql") or "—"),
        (
            "load average (1/5/15 min)",
            " → ".join("/".join(f"{x:.2f}" for x in values) for values in load) + " (start → end)",
        ),
    ]
    return table(("", ""), [(name, str(value)) for name, value in rows])


def coldstart_section(figures: Figures) -> str:
    web, interpreter = figures["fastapi_mangum"], figures["interpreter"]
    rows = [
        ["`python -c pass` (baseline)", "—", ms(interpreter["wall_ms"]), "—", "—", ""],
        [
            "`import fastapi, mangum` (baseline, all runs)",
            ms(web["import_ms"]),
            ms(web["wall_ms"]),
            ms(web["import_ms"]),
            "1.00x",
            "",
        ],
    ]
    for function in figures["functions"]:
        slowest = ", ".join(f"`{name}` {ms(own)}" for name, own in function["slowest"])
        rows.append(
            [
                function["function"],
                ms(function["import_ms"]),
                ms(function["wall_ms"]),
                ms(function["baseline_import_ms"]),
                ratio(function["import_ms"], function["baseline_import_ms"]),
                slowest,
            ]
        )
    header = (
        "function",
        "handler import ms",
        "process wall ms",
        "fastapi + mangum import beside it, ms",
        "ratio",
        "slowest modules (own ms)",
    )
    note = (
        f"Median of {figures['runs']} runs each, each run followed by the fastapi + mangum"
        f" baseline; Python {figures['python']}, bytecode cached."
    )
    return note + "\n\n" + table(header, rows)


def retrieve_section(figures: Figures) -> str:
    rows = [
        [
            f"{row['chunks']:,}",
            row["backend"],
            row["mode"],
            pair(row["bare"]),
            pair(row["handler"]),
            ms(row["overhead_ms"]),
            ratio(row["handler"]["p95"], row["bare"]["p95"]),
        ]
        for row in figures["rows"]
    ]
    header = (
        "chunks",
        "backend",
        "mode",
        "bare SQL p50 / p95 ms (baseline)",
        "handler p50 / p95 ms",
        "handler - bare, p50 ms",
        "p95 ratio",
    )
    intro = f"{figures['queries']} queries per row"
    if "ef_search" in figures:  # recorded since the setting exists
        intro += f"; pgvector rows at `hnsw.ef_search` {figures['ef_search']}"
    return intro + ".\n\n" + table(header, rows)


def relevant_section(figures: Figures) -> str:
    rows = [
        [
            f"{row['memories']:,}",
            f"{row['candidates']:,}",
            row["mode"],
            pair(row["bare"]),
            pair(row["handler"]),
            ms(row["overhead_ms"]),
            ratio(row["handler"]["p95"], row["bare"]["p95"]),
        ]
        for row in figures["rows"]
    ]
    header = (
        "memories",
        "candidates",
        "mode",
        "bare SQL p50 / p95 ms (baseline)",
        "handler p50 / p95 ms",
        "handler - bare, p50 ms",
        "p95 ratio",
    )
    return f"{figures['queries']} queries per row.\n\n" + table(header, rows)


def ingest_section(figures: Figures) -> str:
    floor = {
        row["corpus"]: row["mb"] / row["seconds"]
        for row in figures["rows"]
        if row["config"].startswith("chunk only")
    }
    rows = []
    for row in figures["rows"]:
        mb_s = row["mb"] / row["seconds"] if row["seconds"] else 0.0
        chunks = f"{row['chunks'] / row['seconds']:,.0f}" if row["chunks"] else "—"
        rows.append(
            [
                row["corpus"],
                row["config"],
                f"{row['files']:,}",
                f"{row['mb']:.2f}",
                f"{row['chunks']:,}" if row["chunks"] else "—",
                f"{row['seconds']:.2f}",
                chunks,
                f"{mb_s:.2f}",
                ratio(mb_s, floor.get(row["corpus"], 0.0)),
            ]
        )
    header = (
        "corpus",
        "configuration",
        "files",
        "MB",
        "chunks",
        "seconds",
        "chunks/s",
        "MB/s",
        "MB/s vs chunk only",
    )
    return table(header, rows)


def chain_section(figures: Figures) -> str:
    records = figures["records"]

    def per_second(seconds: float) -> float:
        return records / seconds

    bare = next(r for r in figures["appends"] if r["name"].startswith("bare INSERT, 1 "))
    appends = [
        [r["name"], f"{r['seconds']:.2f}", rate(per_second(r["seconds"])),
         ratio(per_second(r["seconds"]), per_second(bare["seconds"]))]
        for r in figures["appends"]
    ]  # fmt: skip
    fetch = next(r for r in figures["verifies"] if r["name"].startswith("fetch (baseline)"))
    verifies = []
    for r in figures["verifies"]:
        incremental = r["name"].startswith("verify_chain")
        verifies.append(
            [
                r["name"],
                f"{r['seconds'] * 1000:,.1f} ms" if incremental else f"{r['seconds']:.3f} s",
                "—" if incremental else rate(per_second(r["seconds"])),
                "—"
                if incremental
                else ratio(per_second(r["seconds"]), per_second(fetch["seconds"])),
            ]
        )
    intro = f"{records:,} records of {figures['record_bytes']:,} bytes."
    return "\n\n".join(
        [
            intro,
            table(("append", "seconds", "records/s", "vs bare INSERT, 1 per commit"), appends),
            table(("verify", "time", "records/s", "vs fetch only"), verifies),
        ]
    )


def gateway_section(figures: Figures) -> str:
    rows = [
        [
            row["case"],
            pair(row["direct"]),
            pair(row["gateway"]),
            pair(row["added"]),
            ratio(row["gateway"]["p50"], row["direct"]["p50"]),
        ]
        for row in figures["rows"]
    ]
    header = (
        "case",
        "direct to provider p50 / p95 ms (baseline)",
        "through the gateway p50 / p95 ms",
        "added p50 / p95 ms",
        "p50 ratio",
    )
    return f"{figures['calls']} calls per case.\n\n" + table(header, rows)


def dlp_section(figures: Figures) -> str:
    rows = [
        [
            row["corpus"],
            f"{row['documents']:,}",
            f"{row['mb']:.2f}",
            rate(row["redact_mb_s"], 1),
            rate(row["regex_mb_s"], 1),
            rate(row["detect_secrets_mb_s"], 3),
            ratio(row["redact_mb_s"], row["regex_mb_s"]),
        ]
        for row in figures["throughput"]
    ]
    header = (
        "corpus",
        "documents",
        "MB",
        "redact MB/s",
        "one regex pass MB/s (baseline)",
        "detect-secrets MB/s (baseline)",
        "redact vs one regex",
    )
    q = figures["quality"]
    summary = (
        f"Labelled sample: {q['documents']} documents, {q['planted']} planted items: precision "
        f"{q['precision']:.3f}, recall {q['recall']:.3f}; planted items surviving redaction: "
        f"{q['survived']}; plant-free documents with something redacted: "
        f"{q['flagged_decoy_documents']}."
    )
    return table(header, rows) + "\n\n" + summary


def embeddings_section(figures: Figures) -> str:
    rows_in = figures["rows"]
    floor = rows_in.get("hashing")
    rows = []
    for name, row in rows_in.items():
        rows.append(
            [
                name + (" (baseline)" if name == "hashing" else ""),
                f"{row['cold_start_s']:.2f}",
                f"{row['peak_rss_mb']:,.0f}",
                rate(row["docs_per_s"], 1),
                rate(row["titles_per_s"], 1),
                ratio(row["cold_start_s"], floor["cold_start_s"]) if floor else "—",
            ]
        )
    header = (
        "runtime",
        "cold start s",
        "peak RSS MB",
        "docs/s",
        "titles/s",
        "cold start vs hashing",
    )
    torch = "" if "torch" in rows_in else " No torch rows (`make bench-embeddings` has them)."
    intro = f"{figures['docs']} SciFact abstracts and their titles.{torch}"
    return intro + "\n\n" + table(header, rows)


#: Issue #9's nDCG@10 targets through the API: (dataset, configuration, at least, what it beats).
QUALITY_TARGETS = (
    ("scifact", "full-text", 0.686, "BM25 (bm25s) offline"),
    ("scifact", "minilm", 0.733, "the best offline fusion"),
    ("cosqa", "minilm", 0.593, "MiniLM dense alone, offline"),
)


def quality_targets(rows: Sequence[Figures]) -> str:
    """Each target with the measured nDCG@10 of its configuration, and whether it is met."""
    body = []
    for dataset, config, target, beats in QUALITY_TARGETS:
        found = [r for r in rows if r["dataset"] == dataset and r["config"] == config]
        if found:
            measured = found[0]["metrics"]["ndcg_cut_10"]
            cells = [f"{measured:.3f}", "yes" if measured >= target else "no"]
        else:
            cells = ["—", "not measured"]
        body.append([f"{dataset} {config} ≥ {target:.3f}: {beats}", *cells])
    return table(("target (nDCG@10)", "measured", "met"), body)


#: Issue 27's criteria read differences of nDCG@10: none may fall below -TOLERANCE.
TOLERANCE = 0.01
#: The configurations that embed (a model each); full-text rows are the text side of all of them.
FULL_TEXT = "full-text"


def _find(rows: Sequence[Figures], dataset: str, config: str, backend: str) -> Figures | None:
    return next(
        (
            r
            for r in rows
            if (r["dataset"], r["config"], r["backend"]) == (dataset, config, backend)
        ),
        None,
    )


def _ndcg(row: Figures | None) -> float | None:
    return None if row is None else round(row["metrics"]["ndcg_cut_10"], 3)


def _score(row: Figures | None) -> str:
    """nDCG@10 of a row, or a dash."""
    return "—" if row is None else f"{row['metrics']['ndcg_cut_10']:.3f}"


def _revision(row: Figures | None) -> tuple[str, str] | None:
    """The date and git revision a row was measured at (None for a recorded figure)."""
    measured = (row or {}).get("measured") or {}
    if "git" not in measured:
        return None
    return measured.get("date", "?")[:10], measured["git"]


def _figures(row: Figures | None) -> str:
    """``nDCG@10 / Recall@100`` of a row, or a dash."""
    if row is None:
        return "—"
    metrics = row["metrics"]
    return f"{metrics['ndcg_cut_10']:.3f} / {metrics['recall_100']:.3f}"


def difference(value: float | None, baseline: float | None) -> str:
    """``value - baseline`` (nDCG@10 rounded as shown) and whether it meets the criterion: not
    more than TOLERANCE below (above is met: the API may beat its reference)."""
    if value is None or baseline is None:
        return "— not measured"
    delta = round(value - baseline, 3)
    met = delta >= -TOLERANCE - 1e-9
    return f"{delta:+.3f} {'met' if met else '**not met**'}"


def _models(rows: Sequence[Figures], backend: str) -> list[str]:
    """The embeddings configurations measured through the API, in the order rows hold them."""
    found = (r["config"] for r in rows if r["backend"] == backend and r["config"] != FULL_TEXT)
    return list(dict.fromkeys(found))


def _criteria_models(rows: Sequence[Figures], backend: str) -> list[str]:
    """The models issue 27's table shows: those with offline dense rows (all, when none has)."""
    models = _models(rows, backend)
    referenced = {r["config"] for r in rows if r["backend"] == REFERENCE_BACKEND}
    return [m for m in models if reference_configs(m)[0] in referenced] or models


def _model_name(rows: Sequence[Figures], config: str) -> str:
    for row in rows:
        if row["config"] == config and row.get("extra", {}).get("model"):
            return f"{row['extra']['model']} (`{config}`)"
    return f"`{config}`"


def _queries(rows: Sequence[Figures]) -> str:
    row = rows[0]
    words = row.get("extra", {}).get("query_words")
    return f"{row['queries']}" + (f" ({words:g} words)" if words is not None else "")


def criteria_table(rows: Sequence[Figures], backend: str = "exact") -> str:
    """Issue 27's table: per dataset and model, nDCG@10 / Recall@100 of the API's full-text and
    hybrid (``backend`` rows) beside the offline references of the same run, and the
    differences of nDCG@10 its criteria read, each marked met (not more than .01 below) or not."""
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    models = _criteria_models(rows, backend)
    body = []
    for dataset in datasets:
        of_dataset = [r for r in rows if r["dataset"] == dataset]
        text = _find(rows, dataset, FULL_TEXT, backend)
        bm25 = _find(rows, dataset, "bm25s", REFERENCE_BACKEND)
        indexed = _find(rows, dataset, "bm25-index", REFERENCE_BACKEND)
        measured = [m for m in models if _find(rows, dataset, m, backend)] or [None]
        for model in measured:
            if model is None:
                hybrid = dense = fusion = None
            else:
                hybrid = _find(rows, dataset, model, backend)
                dense_config, fusion_config = reference_configs(model)
                dense = _find(rows, dataset, dense_config, REFERENCE_BACKEND)
                fusion = _find(rows, dataset, fusion_config, REFERENCE_BACKEND)
            parts = [_ndcg(text), _ndcg(dense)]
            better = None if None in parts else max(p for p in parts if p is not None)
            run = _revision(text or bm25)

            def cell(row: Figures | None, run: tuple[str, str] | None = run) -> str:
                """Figures, with when they were measured if not in the full-text row's run."""
                figures, revision = _figures(row), _revision(row)
                if revision is None or run is None or revision == run:
                    return figures
                return f"{figures} ({revision[0]}, `{revision[1]}`)"

            body.append(
                [
                    dataset,
                    _queries(of_dataset),
                    "—" if model is None else _model_name(rows, model),
                    cell(text),
                    cell(indexed),
                    difference(_ndcg(text), _ndcg(indexed)),
                    cell(bm25),
                    difference(_ndcg(text), _ndcg(bm25)),
                    cell(dense),
                    cell(hybrid),
                    cell(fusion),
                    difference(_ndcg(hybrid), _ndcg(fusion)),
                    difference(_ndcg(hybrid), better),
                ]
            )
    header = (
        "dataset",
        "queries (median words)",
        "model",
        "full-text (API)",
        "bm25-index",
        "full-text - bm25-index",
        "bm25s",
        "full-text - bm25s",
        "dense",
        "hybrid (API)",
        "fusion",
        "hybrid - fusion",
        "hybrid - max(full-text, dense)",
    )
    return table(header, body)


#: The embeddings bench's runtime of each configuration's model (``make bench-embeddings``).
EMBEDDINGS_RUNTIME = {"minilm": "numpy", "hashing": "hashing"}


def models_table(
    rows: Sequence[Figures], embeddings: Figures | None = None, backend: str = "exact"
) -> str:
    """The model comparison: each embeddings configuration's hybrid and dense nDCG@10 per dataset
    (the models :func:`criteria_table` shows), then its costs: the hybrid retrieval's p50, what
    the model computed in the ingests (texts the harness's cache did not hold), and the embeddings
    bench's figures for its runtime (``embeddings``: that bench's results, when the report has
    them)."""
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    body = []
    for model in _criteria_models(rows, backend):
        dense_config, _ = reference_configs(model)
        cells = []
        latency = []
        embedded, model_seconds = 0, 0.0
        dims = "—"
        for dataset in datasets:
            hybrid = _find(rows, dataset, model, backend)
            dense = _find(rows, dataset, dense_config, REFERENCE_BACKEND)
            cells.append(" / ".join(_score(row) for row in (hybrid, dense)))
            if hybrid is not None:
                if "query_ms_p50" in hybrid:
                    latency.append(f"{hybrid['query_ms_p50']:.0f}")
                extra = hybrid.get("extra", {})
                embedded += extra.get("ingest_embedded", 0)
                model_seconds += extra.get("ingest_model_seconds", 0.0)
            if dense is not None:
                dims = str(dense.get("extra", {}).get("dimensions", "—"))
        ingest = f"{embedded:,} texts, {model_seconds:,.0f} s" if embedded else "all from the cache"
        runtime = (embeddings or {}).get("rows", {}).get(EMBEDDINGS_RUNTIME.get(model, ""))
        bench = (
            f"{runtime['docs_per_s']:,.1f} docs/s, {runtime['cold_start_s']:.2f} s,"
            f" {runtime['peak_rss_mb']:,.0f} MB"
            if runtime
            else "—"
        )
        body.append(
            [_model_name(rows, model), dims, *cells, " / ".join(latency) or "—", ingest, bench]
        )
    header = (
        "model",
        "dims",
        *(f"{d}: hybrid / dense nDCG@10" for d in datasets),
        "hybrid retrieve p50 ms (" + ", ".join(datasets) + ")",
        "model time in the ingests",
        "encode docs/s, cold start, peak RSS (`make bench-embeddings`)",
    )
    if not body:
        return "No embeddings configuration measured with its references."
    return table(header, body)


def _when(rows: Sequence[Figures]) -> str:
    """When, at which revision and by which command the table's rows were measured."""
    seen = dict.fromkeys(
        (
            r.get("measured", {}).get("date", "?")[:10],
            r.get("measured", {}).get("git", "?"),
            r.get("measured", {}).get("command", "?"),
            r.get("measured", {}).get("query_limit"),
        )
        for r in rows
        if "source" not in r.get("measured", {})
    )
    runs = [
        f"{date}, `{git}`: `{command}`" + (f" (first {limit} queries)" if limit else "")
        for date, git, command, limit in seen
    ]
    return "; ".join(runs) or "—"


def criteria_section(rows: Sequence[Figures], embeddings: Figures | None = None) -> str:
    """Issue 27's table and the model comparison, with how their rows were measured."""
    shown = {FULL_TEXT, *_criteria_models(rows, "exact")}
    issue = [
        r
        for r in rows
        if r["backend"] == REFERENCE_BACKEND or r["config"] in shown
        if r["backend"] in ("exact", REFERENCE_BACKEND)
    ]
    if not issue:
        return "Not measured yet (`make eval`)."
    note = (
        "nDCG@10 / Recall@100; full-text and hybrid through the retrieve use case (exact"
        " backend), `bm25-index`, `bm25s`, `dense` and `fusion` offline from the same dataset in"
        " the same run (`bench/reference.py`; `bm25-index`: exhaustive BM25 over the service's"
        " own index, identical documents ranked once). A difference (of nDCG@10) is met when it"
        f" is not more than {TOLERANCE:.2f} below; above counts as met. Measured: {_when(issue)}."
    )
    models = models_table(issue, embeddings)
    return "\n\n".join([note, criteria_table(issue), "Models and their costs:", models])


def quality_section(rows: Sequence[Figures], embeddings: Figures | None = None) -> str:
    body = []
    for row in rows:
        measured = row.get("measured", {})
        if "source" in measured:
            how = measured["source"]
        else:
            limit = measured.get("query_limit")
            how = f"{measured.get('date', '?')[:10]}, `{measured.get('git', '?')}`" + (
                f", first {limit} queries" if limit else ""
            )
        metrics = row["metrics"]
        body.append(
            [
                row["dataset"],
                row["config"],
                row["backend"],
                str(row["queries"]),
                f"{metrics['ndcg_cut_10']:.3f}",
                f"{metrics['recall_100']:.3f}",
                f"{metrics['recip_rank']:.3f}",
                how,
            ]
        )
    header = (
        "dataset",
        "configuration",
        "backend",
        "queries",
        "nDCG@10",
        "Recall@100",
        "MRR@10",
        "measured",
    )
    return "\n\n".join(
        [
            criteria_section(rows, embeddings),
            "Every row:",
            table(header, body),
            quality_targets(rows),
        ]
    )


BENCH_SECTIONS: dict[str, tuple[str, Callable[[Figures], str]]] = {
    "coldstart": ("Cold start", coldstart_section),
    "retrieve": ("Retrieve latency", retrieve_section),
    "relevant": ("Memory /relevant latency", relevant_section),
    "ingest": ("Ingest throughput", ingest_section),
    "chain": ("Evidence chain", chain_section),
    "gateway": ("Model gateway overhead", gateway_section),
    "dlp": ("DLP redaction", dlp_section),
    "embeddings": ("Embeddings runtimes (numpy half)", embeddings_section),
}


def bench_body(name: str, record: Figures) -> str:
    """A benchmark's section: how and when it ran, then its tables (or why it has none)."""
    when = record["date"][:16].replace("T", " ") + " UTC"
    load = "/".join(f"{x:.1f}" for x in record["load_average_1min"])
    how = (
        f"`{record['command']}` ({record['mode']} run): {record['seconds']:.0f} s from {when},"
        f" load average {load} (start/end)."
    )
    if "results" not in record:
        error = record["error"]
        return (
            f"{how}\n\n**Failed** (exit {record['returncode']}), last lines:\n\n```\n{error}\n```"
        )
    return f"{how}\n\n{BENCH_SECTIONS[name][1](record['results'])}"


#: The plots ``plots.render_plots`` draws (``NAME.png``) and their alt texts.
PLOTS = {
    "retrieve": "retrieve latency against corpus size",
    "relevant": "memory /relevant latency against the number of memories",
    "coldstart": "handler import time per function",
    "quality": "nDCG@10 per configuration and dataset",
}


def quality_body(rows: Sequence[Figures], embeddings: Figures | None, plots: str) -> str:
    """The quality section with its plot (``plots``: the folder, relative to the page)."""
    return quality_section(rows, embeddings) + f"\n\n![{PLOTS['quality']}]({plots}/quality.png)"


def sections(latest: Figures, quality: Sequence[Figures], plots: str) -> dict[str, str]:
    """Section name → Markdown body, for the benchmarks this run holds (and quality if any);
    a section with figures shows its plot, from the folder ``plots`` (relative to the page)."""
    bodies = {"machine": machine_section(latest)}
    for name, record in latest["benches"].items():
        bodies[name] = bench_body(name, record)
    if quality:
        embeddings = latest["benches"].get("embeddings", {}).get("results")
        bodies["quality"] = quality_body(quality, embeddings, plots)
    for name, alt in PLOTS.items():
        has_figures = "results" in latest["benches"].get(name, {})
        if name in bodies and has_figures:
            bodies[name] += f"\n\n![{alt}]({plots}/{name}.png)"
    return bodies


TITLES = {"machine": "Machine and run", **{k: v[0] for k, v in BENCH_SECTIONS.items()}}
TITLES["quality"] = "Retrieval quality (bench/results/quality.json)"


def render_report(latest: Figures, quality: Sequence[Figures], plots: str) -> str:
    parts = ["# Benchmark report", ""]
    for name, body in sections(latest, quality, plots).items():
        parts += [f"## {TITLES[name]}", "", body, ""]
    return "\n".join(parts)


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with what lies between ``name``'s markers replaced by ``body``; the section is
    appended (with its markers) when the text has none."""
    start, end = f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"
    block = f"{start}\n\n{body.strip()}\n\n{end}"  # blank lines: Markdown blocks of their own
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    return text.rstrip("\n") + f"\n\n{block}\n"


def update_document(text: str, latest: Figures, quality: Sequence[Figures], plots: str) -> str:
    for name, body in sections(latest, quality, plots).items():
        text = replace_section(text, name, body)
    return text
