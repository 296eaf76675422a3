"""The suite's plots, PNG files rendered with matplotlib (no display needed).

From ``bench/results/latest.json``: retrieve latency against corpus size (handler and bare SQL,
per backend and mode), memory ``/relevant`` latency against the number of memories, and each
function's handler import time against the fastapi + mangum baseline; from
``bench/results/quality.json``: nDCG@10 per configuration and dataset. Latency points are p50,
their bars reach up to p95. A plot whose benchmark has no figures in the run is skipped.

    .venv/bin/python bench/plots.py [--results bench/results/latest.json] [--out docs/benchmarks]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

Figures = Mapping[str, Any]
DPI = 110
BACKEND_COLOURS = {"exact": "tab:blue", "pgvector": "tab:orange"}


def _latency(ax: Axes, sizes: Sequence[int], stats: Sequence[Figures], **style: Any) -> None:
    """p50 points joined by a line, each with a bar up to its p95."""
    p50 = [s["p50"] for s in stats]
    above = [s["p95"] - s["p50"] for s in stats]
    ax.errorbar(sizes, p50, yerr=[[0] * len(p50), above], capsize=3, **{"marker": "o", **style})


def _size_axis(ax: Axes, sizes: Sequence[int], label: str) -> None:
    """A log axis ticked at the measured sizes only, written out (10,000, not 10^4)."""
    ax.set_xscale("log")
    ticks = sorted(set(sizes))
    ax.set_xticks(ticks, [f"{size:,}" for size in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel(label)


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    return path


def retrieve_plot(figures: Figures, path: Path) -> Path:
    rows = figures["rows"]
    modes = list(dict.fromkeys(row["mode"] for row in rows))
    figure = Figure(figsize=(5 * len(modes), 4.2), layout="constrained")
    axes = figure.subplots(1, len(modes), squeeze=False)[0]
    for ax, mode in zip(axes, modes, strict=True):
        for backend in dict.fromkeys(row["backend"] for row in rows):
            picked = sorted(
                (r for r in rows if r["mode"] == mode and r["backend"] == backend),
                key=lambda r: r["chunks"],
            )
            sizes = [r["chunks"] for r in picked]
            colour = BACKEND_COLOURS.get(backend)
            _latency(ax, sizes, [r["handler"] for r in picked], color=colour,
                     label=f"{backend}: handler")  # fmt: skip
            _latency(ax, sizes, [r["bare"] for r in picked], color=colour, linestyle="--",
                     marker="s", label=f"{backend}: bare SQL")  # fmt: skip
        _size_axis(ax, [r["chunks"] for r in rows], "chunks")
        ax.set_yscale("log")  # exact hybrid at 100k is ten times the rest
        ax.yaxis.set_minor_locator(LogLocator(subs=(2, 5)))
        for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            axis(FuncFormatter(lambda value, _: f"{value:g}"))  # 300, not 3x10^2
        ax.set_title(f"retrieve, {mode}")
        ax.set_ylabel("ms (p50, bar to p95)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    return _save(figure, path)


def relevant_plot(figures: Figures, path: Path) -> Path:
    rows = figures["rows"]
    modes = list(dict.fromkeys(row["mode"] for row in rows))
    figure = Figure(figsize=(4.2 * len(modes), 4), layout="constrained")
    axes = figure.subplots(1, len(modes), squeeze=False, sharey=True)[0]
    for ax, mode in zip(axes, modes, strict=True):
        picked = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["memories"])
        sizes = [r["memories"] for r in picked]
        _latency(ax, sizes, [r["handler"] for r in picked], color="tab:green", label="handler")
        _latency(ax, sizes, [r["bare"] for r in picked], color="tab:gray", linestyle="--",
                 marker="s", label="bare SQL")  # fmt: skip
        _size_axis(ax, sizes, "memories")
        ax.set_title(f"/relevant, {mode}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_ylabel("ms (p50, bar to p95)")
    return _save(figure, path)


def coldstart_plot(figures: Figures, path: Path) -> Path:
    functions = sorted(figures["functions"], key=lambda f: f["import_ms"])
    figure = Figure(figsize=(8, 0.35 * len(functions) + 1.5), layout="constrained")
    ax = figure.subplots()
    names = [f["function"].removesuffix("Function") for f in functions]
    ax.barh(names, [f["import_ms"] for f in functions], color="tab:purple")
    ax.scatter([f["baseline_import_ms"] for f in functions], names, color="black", marker="|",
               s=300, zorder=3, label="import fastapi, mangum, measured beside it")  # fmt: skip
    ax.set_xlabel(f"handler module import, ms (median of {figures['runs']})")
    ax.set_title("cold start: handler import time per function")
    ax.legend(fontsize="small", loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    return _save(figure, path)


def quality_plot(rows: Sequence[Figures], path: Path) -> Path:
    datasets = list(dict.fromkeys(row["dataset"] for row in rows))
    backends = {row["backend"] for row in rows}

    def label(row: Figures) -> str:
        return row["config"] if len(backends) == 1 else f"{row['config']} ({row['backend']})"

    configs = list(dict.fromkeys(label(row) for row in rows))
    width = 0.8 / len(configs)
    figure = Figure(figsize=(min(14, max(6, 2.2 * len(datasets) * len(configs) / 2)), 4.2),
                    layout="constrained")  # fmt: skip
    ax = figure.subplots()
    for index, config in enumerate(configs):
        values = {row["dataset"]: row["metrics"]["ndcg_cut_10"] for row in rows
                  if label(row) == config}  # fmt: skip
        positions = [d + (index - (len(configs) - 1) / 2) * width for d in range(len(datasets))]
        heights = [values.get(dataset, 0.0) for dataset in datasets]
        bars = ax.bar(positions, heights, width, label=config)
        ax.bar_label(bars, labels=[f"{h:.2f}" if h else "" for h in heights], fontsize="x-small")
    ax.set_xticks(range(len(datasets)), datasets)
    ax.set_ylabel("nDCG@10")
    ax.set_ylim(0, 1)
    ax.set_title("retrieval quality through the retrieve use case, beside offline references")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def _results(latest: Figures, name: str) -> Figures | None:
    return latest.get("benches", {}).get(name, {}).get("results")


def render_plots(latest: Figures, quality: Sequence[Figures], out: Path) -> list[Path]:
    """Every plot the figures allow, written to ``out``; the paths written."""
    written = []
    for name, plot in (
        ("retrieve", retrieve_plot),
        ("relevant", relevant_plot),
        ("coldstart", coldstart_plot),
    ):
        figures = _results(latest, name)
        if figures:
            written.append(plot(figures, out / f"{name}.png"))
    if quality:
        written.append(quality_plot(quality, out / "quality.png"))
    return written


def main(argv: list[str] | None = None) -> int:
    from bench_support import LATEST, PLOTS
    from quality_results import QUALITY_RESULTS, load_quality

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=LATEST)
    parser.add_argument("--quality", type=Path, default=QUALITY_RESULTS)
    parser.add_argument("--out", type=Path, default=PLOTS)
    args = parser.parse_args(argv)
    latest = json.loads(args.results.read_text())
    for path in render_plots(latest, load_quality(args.quality), args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
