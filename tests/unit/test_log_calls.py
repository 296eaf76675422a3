"""Every structured log call's keys against the names ``logging.LogRecord`` reserves.

Powertools passes a log call's keyword arguments to ``logging`` as ``extra``; a key that names a
``LogRecord`` attribute (``created``, ``name``, ``msg``...) makes ``makeRecord`` raise ``KeyError``
at run time, and only when the level is enabled: the writer logged ``created=`` at INFO, so every
message failed in production while the tests, run at WARNING, passed. The scan finds such a key
wherever it is, whatever level the suite runs at.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [ROOT / "shared", ROOT / "functions", ROOT / "bench", ROOT / "scripts"]
LEVELS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}
# The attributes of a record (taskName joined in 3.12), and the two makeRecord refuses by name.
RESERVED = set(vars(logging.LogRecord("n", logging.INFO, "p", 1, "m", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def _is_logger(node: ast.expr) -> bool:
    """``logger.info``, ``self.logger.info``, ``_log.info``: a receiver named like a logger."""
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return "log" in name.lower()


def _keys(call: ast.Call) -> list[tuple[str, int]]:
    """The keys a log call hands to ``extra``: its keyword arguments, and ``extra={...}``'s."""
    keys = []
    for keyword in call.keywords:
        if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
            keys += [
                (key.value, key.lineno)
                for key in keyword.value.keys
                if isinstance(key, ast.Constant) and isinstance(key.value, str)
            ]
        elif keyword.arg is not None:
            keys.append((keyword.arg, call.lineno))
    return keys


def reserved_keys_in(source: str, path: str = "<source>") -> list[str]:
    """``path:line key`` for each log call key that ``LogRecord`` reserves."""
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LEVELS
            and _is_logger(node.func.value)
        ):
            found += [f"{path}:{line} {key}" for key, line in _keys(node) if key in RESERVED]
    return found


def test_no_log_call_passes_a_key_that_log_record_reserves() -> None:
    files = [path for folder in SCANNED for path in sorted(folder.rglob("*.py"))]
    assert len(files) > 50, "the scan found too few files: is ROOT right?"
    found = [
        hit
        for path in files
        for hit in reserved_keys_in(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        'logger.info("x", created=True)',
        'self.logger.error("x", name="n")',
        'logger.warning("x", extra={"msg": 1})',
        'LOG.debug("x", message="m")',
    ],
)
def test_the_scan_finds_a_reserved_key(source: str) -> None:
    assert reserved_keys_in(source)


def test_the_scan_passes_ordinary_keys_and_other_calls() -> None:
    assert reserved_keys_in('logger.info("x", recordCreated=True, chain="c")') == []
    assert reserved_keys_in("record.update(created=True)") == []


def test_a_reserved_key_fails_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """What the scan guards against, shown on the real logging machinery."""
    from aws_lambda_powertools import Logger

    logger = Logger(service="scan-check", level="INFO")
    with pytest.raises(KeyError, match="created"):
        logger.info("attribution recorded", created=True)
