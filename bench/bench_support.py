"""What the benchmarks share: a function of template.yaml loaded and called as Lambda does.

The handler is imported by the local runtime's own invoker (the function's CodeUri, its layer on
``sys.path``), and each call gets a fresh Lambda context object, so a benchmark measures the code
the template deploys, through its real entry point.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from context_ledger.local.invoker import Invoker, LambdaContext
from context_ledger.local.template import Function, read_template

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"
#: The suite's last results (``bench/suite.py`` writes them) and where its plots go
#: (``bench/plots.py`` renders them): here, so neither script imports the other.
LATEST = Path(__file__).resolve().parent / "results" / "latest.json"
PLOTS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks"
REGION = "us-east-1"

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass(frozen=True)
class LambdaFunction:
    """One template function: its handler object and a context per invocation."""

    function: Function
    handler: Handler

    def context(self) -> LambdaContext:
        return LambdaContext(self.function, region=REGION)

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        return self.handler(event, self.context())


def load_function(logical_id: str) -> LambdaFunction:
    """The template's function ``logical_id`` (``RetrieveFunction``), imported once."""
    template = read_template(TEMPLATE)
    function = template.function(logical_id)
    invoker = Invoker(dict(template.functions), region=REGION)
    return LambdaFunction(function=function, handler=invoker.handler(function))


def load_queries(path: Path, count: int) -> list[str]:
    """The first ``count`` distinct query texts of a BEIR ``queries.jsonl``, in file order."""
    queries: dict[str, None] = {}
    with path.open() as handle:
        for line in handle:
            queries.setdefault(json.loads(line)["text"].strip(), None)
            if len(queries) >= count:
                break
    return list(queries)


def scratch_dir(prefix: str) -> Path:
    """A new temporary directory, removed when the benchmark's process exits."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def git_revision() -> str:
    """The checkout's commit (short), ``+dirty`` when the work tree differs from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=TEMPLATE.parent, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    revision = git("rev-parse", "--short", "HEAD") or "unknown"
    return f"{revision}+dirty" if git("status", "--porcelain", "--untracked-files=no") else revision


def write_results(path: Path | None, figures: dict[str, Any]) -> None:
    """Write a benchmark's figures as JSON (its ``--json PATH``), dataclasses as objects.

    ``bench/suite.py`` reads these instead of the printed tables, which stay for people.
    """
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2, default=_as_json) + "\n")


def _as_json(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


@dataclass(frozen=True)
class Stats:
    """Latency figures of a set of timed calls, in milliseconds."""

    p50: float
    p95: float
    p99: float
    mean: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Stats:
        ms = [s * 1000 for s in seconds]
        cuts = statistics.quantiles(ms, n=100, method="inclusive")
        return cls(cuts[49], cuts[94], cuts[98], statistics.fmean(ms))

    def cells(self, digits: int = 1) -> str:
        """``p50/p95 p99/mean`` in milliseconds, two columns of a table."""
        return (
            f"{self.p50:>7.{digits}f}/{self.p95:<7.{digits}f} "
            f"{self.p99:>7.{digits}f}/{self.mean:<7.{digits}f}"
        )


def template_log_level() -> str:
    """The functions' log level in a deployment (the template's ``LogLevel`` default): benches
    that run the functions run them at it, so a log call that fails only at INFO fails here."""
    return read_template(TEMPLATE).resolver.parameters["LogLevel"]


class ServiceLog:
    """The service's log lines, written to a file rather than the terminal (the formatting cost
    stays, as in production) and counted by level at the end.

    Call :meth:`capture` after the functions' loggers exist (the runtime has started), in every
    process that runs functions, each with a file of its own.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def capture(self, name: str) -> Path:
        """Send this process's service log to ``<directory>/<name>.log``."""
        import logging

        from context_ledger.log import logger

        path = self.directory / f"{name}.log"
        sink = path.open("a", buffering=1)  # lives as long as the process
        for handler in logging.getLogger(logger.service).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sink)
        return path

    def summary(self) -> str:
        """``N lines (INFO a, ERROR b)``, and the most frequent ERROR/CRITICAL messages."""
        levels: dict[str, int] = {}
        errors: dict[str, int] = {}
        for path in sorted(self.directory.glob("*.log")):
            for line in path.read_text(errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                    level, message = str(entry.get("level")), str(entry.get("message"))
                except (ValueError, AttributeError):
                    level, message = "UNSTRUCTURED", line[:120]
                levels[level] = levels.get(level, 0) + 1
                if level in ("ERROR", "CRITICAL", "UNSTRUCTURED"):
                    errors[message] = errors.get(message, 0) + 1
        counted = ", ".join(f"{level} {count}" for level, count in sorted(levels.items()))
        lines = [f"service log: {sum(levels.values())} lines ({counted or 'none'})"]
        top = sorted(errors.items(), key=lambda item: -item[1])[:5]
        lines += [f"  {count:>6} x {message}" for message, count in top]
        return "\n".join(lines)
