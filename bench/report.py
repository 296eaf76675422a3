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


def quality_section(rows: Sequence[Figures]) -> str:
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
    return table(header, body) + "\n\n" + quality_targets(rows)


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


def sections(latest: Figures, quality: Sequence[Figures], plots: str) -> dict[str, str]:
    """Section name → Markdown body, for the benchmarks this run holds (and quality if any);
    a section with figures shows its plot, from the folder ``plots`` (relative to the page)."""
    bodies = {"machine": machine_section(latest)}
    for name, record in latest["benches"].items():
        bodies[name] = bench_body(name, record)
    if quality:
        bodies["quality"] = quality_section(quality)
    for name, alt in PLOTS.items():
        has_figures = name == "quality" or "results" in latest["benches"].get(name, {})
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
