"""The README's walk-through runs as written against a dev stack.

The script is the README's own: every fenced block marked ``sh walk-through``, in order, run by
bash with ``set -euo pipefail`` in the checkout, the way a reader pastes them into a second
terminal while ``make dev`` runs in the first. Two things differ from a reader's machine: the CLI
is this test session's (the README names ``.venv/bin/context-ledger``), and the stack is a
``context-ledger dev`` on a free port (the README's ``PORT``) over a database of this test's own,
searching full-text only (``--embeddings none``), so ingesting ``docs/`` takes seconds rather
than a minute of MiniLM; the hybrid dev stack has its own tests (test_dev_embeddings.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dev_support import CL, ROOT, Dev, shell_env

from context_ledger.local.postgres import ensure_database

README = ROOT / "README.md"
MARK = "```sh walk-through\n"
QUERY = "how is the evidence chain verified"


def walkthrough() -> str:
    """The README's marked blocks, joined in order."""
    blocks = re.findall(rf"^{re.escape(MARK)}(.*?)^```$", README.read_text(), re.M | re.S)
    return "\n".join(blocks)


def json_documents(text: str) -> list[dict[str, Any]]:
    """The JSON objects ``python3 -m json.tool`` printed, in order (each starts a line)."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while (start := text.find("\n{\n", at)) != -1:
        document, end = decoder.raw_decode(text, start + 1)
        found.append(document)
        at = end
    return found


@pytest.fixture
def dev(pg_server_uri: str, tmp_path: Path) -> Iterator[tuple[Dev, dict[str, str]]]:
    """``make dev`` of a developer's shell, on a home and database of this test's own."""
    database = ensure_database(pg_server_uri, f"ctxl_readme_{os.getpid()}_{time.monotonic_ns()}")
    env = shell_env(tmp_path / "home", DATABASE_URL=database)
    server = Dev(env, tmp_path / "dev.log", "--embeddings", "none")
    try:
        server.wait_ready()
        yield server, env
    finally:
        if server.process.poll() is None:
            server.end(signal.SIGTERM)


def test_the_walkthrough_has_its_steps() -> None:
    script = walkthrough()

    for step in ("org create", "space create", "source create", "/grants", "ingest docs"):
        assert step in script
    assert "/api/v1/context/retrieve" in script
    assert f'search "{QUERY}"' in script
    assert "/api/v1/context/attribution/$ATTRIBUTION_ID" in script
    assert "jq" not in script  # the README says curl and python3 are all it needs


def test_the_readmes_walkthrough_runs_as_written_against_a_dev_stack(dev) -> None:
    server, env = dev
    script = walkthrough().replace(".venv/bin/context-ledger", CL)

    ran = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{script}"],
        cwd=ROOT,
        env={**env, "PORT": str(server.port)},
        capture_output=True,
        text=True,
        timeout=240,
    )

    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:] + server.output()[-3000:]
    out, err = ran.stdout, ran.stderr
    # 2. docs/ became the source's first index version.
    assert re.search(r"^published index version 1: \d+ files", out, re.M), out
    retrieval, record = json_documents(out)
    # 3. curl: alice's answer, ranked chunks of docs/ from the team space.
    assert retrieval["chunks"], retrieval
    assert {chunk["level"] for chunk in retrieval["chunks"]} == {"team"}
    for chunk in retrieval["chunks"]:
        assert (ROOT / "docs" / chunk["path"]).is_file(), chunk["path"]
    assert retrieval["tokensUsed"] <= 1500
    # 4. The CLI's table (shown through tee) ends with the ids; its attributionId was kept.
    table = err[err.index("path:lines (symbol or heading)") :].splitlines()
    ids = next(line for line in table if line.startswith("tokensUsed "))
    rows = table[1 : table.index(ids)]
    assert rows, table
    assert all(" team " in row for row in rows), table
    attribution_id = ids.split("attributionId ", 1)[1].split()[0]
    # 5. The evidence record of that retrieval, in the organisation's chain, and the chains verify.
    assert record["attributionId"] == attribution_id
    assert record["userId"] == "alice"
    assert record["chain"].startswith("org:")
    assert len(record["record"]["chunks"]) == table.index(ids) - 1  # the rows it delivered
    assert all(re.fullmatch(r"[0-9a-f]{64}", c["sha256"]) for c in record["record"]["chunks"])
    assert re.search(r"^org:\S+: ok, [12] entries checked$", out, re.M), out  # the writer is async
    assert re.search(r"^\d+ chains verified, 0 failed$", out, re.M), out
