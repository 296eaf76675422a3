"""Cold start: how long each template function's handler module takes to import.

For every function of ``template.yaml`` (read by the local runtime's template loader) it runs
``python -X importtime -c "import <module>"`` in a fresh process, in the function's CodeUri with
its layers on ``PYTHONPATH``, as Lambda's runtime imports the handler, several times, and reports
the median import time of the handler module (the cumulative time ``-X importtime`` gives its
line), the median wall time of the whole process, and the five modules with the largest median
own ("self") import time. Baselines from the same run, in the same way: ``python -c pass`` (the
interpreter starting and stopping) and ``import fastapi, mangum`` (the web stack every HTTP
function needs), the latter run after each of a function's imports, so each function's ratio
compares it with a baseline measured beside it while the machine's load drifts.

One discarded run per function comes first, so bytecode caches exist and the figures are those
of a warm disk; Lambda's own cold start adds the runtime's bootstrap and the package download.
The interpreter is this virtualenv's (Lambda runs 3.12).

    .venv/bin/python bench/coldstart.py [--runs 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_support import TEMPLATE, write_results

_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)\s*$")
TOP_MODULES = 5
#: What a function's process inherits: enough to run, nothing of this shell's configuration.
_KEPT_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")


@dataclass(frozen=True)
class ImportLine:
    """One line of ``-X importtime``: a module's own and cumulative import time."""

    module: str
    depth: int  # 0: imported by the code run; 1: by a depth-0 module; ...
    self_us: int
    cumulative_us: int


def parse_importtime(stderr: str) -> list[ImportLine]:
    """The import lines of ``-X importtime`` output, in order (its header and other lines are
    skipped)."""
    lines = []
    for raw in stderr.splitlines():
        match = _LINE.match(raw)
        if match:
            self_us, cumulative_us, indent, module = match.groups()
            lines.append(ImportLine(module, len(indent) // 2, int(self_us), int(cumulative_us)))
    return lines


def imported_us(lines: Iterable[ImportLine], modules: Iterable[str]) -> int:
    """Microseconds the code run spent importing ``modules`` (their top-level lines)."""
    wanted = set(modules)
    found = {line.module: line.cumulative_us for line in lines if line.depth == 0}
    missing = wanted - set(found)
    if missing:
        raise ValueError(f"no top-level import of {', '.join(sorted(missing))} in the output")
    return sum(found[module] for module in wanted)


def slowest_modules(runs: Sequence[Sequence[ImportLine]], count: int) -> list[tuple[str, float]]:
    """The ``count`` modules with the largest median own import time over ``runs``, in ms."""
    own: dict[str, list[int]] = {}
    for lines in runs:
        for line in lines:
            own.setdefault(line.module, []).append(line.self_us)
    medians = {module: statistics.median(values) / 1000 for module, values in own.items()}
    return sorted(medians.items(), key=lambda item: (-item[1], item[0]))[:count]


@dataclass(frozen=True)
class Sample:
    """One process: the named modules' cumulative import time and the wall time, in ms."""

    import_ms: float
    wall_ms: float  # spawn to exit
    lines: list[ImportLine]


@dataclass(frozen=True)
class Measured:
    """Medians over a command's samples, in milliseconds."""

    import_ms: float
    wall_ms: float
    slowest: list[tuple[str, float]]

    @classmethod
    def of(cls, samples: Sequence[Sample]) -> Measured:
        return cls(
            statistics.median(s.import_ms for s in samples),
            statistics.median(s.wall_ms for s in samples),
            slowest_modules([s.lines for s in samples], TOP_MODULES),
        )


def sample(
    code: str, modules: Sequence[str], *, cwd: Path | None = None, path: Sequence[Path] = ()
) -> Sample:
    """Run ``python -X importtime -c code`` once, in ``cwd`` with ``path`` as PYTHONPATH."""
    env = {name: os.environ[name] for name in _KEPT_ENVIRONMENT if name in os.environ}
    if path:
        env["PYTHONPATH"] = os.pathsep.join(str(folder) for folder in path)
    command = [sys.executable, "-X", "importtime", "-c", code]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall_ms = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{code!r} in {cwd or '.'} failed:\n{done.stderr[-2000:]}")
    lines = parse_importtime(done.stderr)
    return Sample(imported_us(lines, modules) / 1000, wall_ms, lines)


WEB_STACK = ("import fastapi, mangum", ["fastapi", "mangum"])


def run(runs: int, report: Callable[[str], None]) -> dict[str, Any]:
    """Each function's import ``runs`` times, each run followed by the web-stack baseline, so
    every function has a baseline measured beside it (the machine's load drifts)."""
    from context_ledger.local.template import read_template

    sample(*WEB_STACK)  # discarded, as each function's first import: bytecode caches exist
    interpreter = Measured.of([sample("pass", []) for _ in range(runs)])
    report(f"{'python -c pass (baseline)':<28} {'':>10} {interpreter.wall_ms:>9.0f}")
    functions, web_samples = [], []
    for function in read_template(TEMPLATE).functions.values():
        code, where = (
            f"import {function.module}",
            {"cwd": function.code_dir, "path": function.layer_dirs},
        )
        sample(code, [function.module], **where)
        own, web = [], []
        for _ in range(runs):
            own.append(sample(code, [function.module], **where))
            web.append(sample(*WEB_STACK))
        figures, baseline = Measured.of(own), Measured.of(web)
        web_samples += web
        functions.append(
            {
                "function": function.logical_id,
                "module": function.module,
                **vars(figures),
                "baseline_import_ms": baseline.import_ms,
            }
        )
        report(
            f"{function.logical_id:<28} {figures.import_ms:>10.0f} {figures.wall_ms:>9.0f}"
            f" {baseline.import_ms:>9.0f}  {figures.import_ms / baseline.import_ms:>5.1f}x  "
            + ", ".join(f"{name} {ms:.0f}" for name, ms in figures.slowest)
        )
    return {
        "runs": runs,
        "python": sys.version.split()[0],
        "interpreter": vars(interpreter),
        "fastapi_mangum": vars(Measured.of(web_samples)),
        "functions": functions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measured runs per function")
    parser.add_argument("--json", type=Path, help="also write the figures here (bench/suite.py)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    started = time.perf_counter()
    print(
        f"{'function (median of ' + str(args.runs) + ')':<28} {'import ms':>10} {'wall ms':>9}"
        f" {'web ms':>9}  {'ratio':>6}  slowest modules (own ms)"
    )
    figures = run(args.runs, lambda line: print(line, flush=True))
    print(f"total {time.perf_counter() - started:.0f} s")
    write_results(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
