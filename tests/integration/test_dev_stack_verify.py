"""`context-ledger dev` and `context-ledger verify` on one home agree, as two processes.

The bug this pins: the dev stack's functions took the key id from the template (``k1``) while
the CLI took its own default (``local-1``), so on a healthy chain the CLI said "FAILED at seq 1
(the entry's key id is unknown)" while the API said ok. Only separate processes show it: in one
process the runtime's environment is the CLI's too.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from context_ledger.local.postgres import ensure_database

ROOT = Path(__file__).resolve().parents[2]
VERIFY = "/api/v1/observability/chain/verify"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def stack_env(pg_server_uri: str, tmp_path: Path) -> dict[str, str]:
    """What a developer's shell holds: a home, a database, nothing else of ours."""
    database = ensure_database(pg_server_uri, f"ctxl_dev_{os.getpid()}_{time.monotonic_ns()}")
    keep = ("PATH", "HOME", "LANG", "PYENV_ROOT", "TMPDIR")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    return {**env, "CONTEXT_LEDGER_HOME": str(tmp_path / "home"), "DATABASE_URL": database}


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "context_ledger.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def dev_stack(stack_env: dict[str, str]) -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "context_ledger.cli", "dev", "--port", str(port)],
        cwd=ROOT,
        env=stack_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read()
            try:
                httpx.get(f"{url}/api/v1/context/capabilities", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_cli_verify_and_the_api_agree_on_a_dev_stack(
    dev_stack: str, stack_env: dict[str, str]
) -> None:
    created = _cli(stack_env, "org", "create", "Acme")
    assert created.returncode == 0, created.stderr
    token = re.search(r"^ADMIN_TOKEN='?([^'\n]+)'?$", created.stdout, re.M)[1]
    headers = {"Authorization": f"Bearer {token}"}
    for query in ("how are refunds authorised", "what does the writer do"):
        answer = httpx.post(
            f"{dev_stack}/api/v1/context/retrieve", headers=headers, json={"query": query}
        )
        assert answer.status_code == 200, answer.text
    deadline = time.monotonic() + 30
    while True:  # the writer appends asynchronously
        api = httpx.get(f"{dev_stack}{VERIFY}", headers=headers, params={"full": "true"}).json()
        if api["checked"] >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.3)

    cli = _cli(stack_env, "verify", "--full")

    assert (api["ok"], api["checked"]) == (True, 2)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert re.search(r": ok, 2 entries checked$", cli.stdout, re.M), cli.stdout
    # and the incremental check, which reads the dev stack's signed checkpoints
    assert _cli(stack_env, "verify").returncode == 0

    # Then both see the same tampering.
    with psycopg.connect(stack_env["DATABASE_URL"], autocommit=True) as admin:
        admin.execute("ALTER TABLE evidence_chain DISABLE TRIGGER evidence_chain_no_update")
        admin.execute("UPDATE evidence_chain SET record = set_byte(record, 3, 32) WHERE seq = 2")
        admin.execute("ALTER TABLE evidence_chain ENABLE TRIGGER evidence_chain_no_update")
    api = httpx.get(f"{dev_stack}{VERIFY}", headers=headers, params={"full": "true"}).json()
    cli = _cli(stack_env, "verify", "--full")

    assert (api["ok"], api["firstBadSequence"], api["reason"]) == (False, 2, "mac mismatch")
    assert cli.returncode == 1
    assert "FAILED at seq 2 (mac mismatch)" in cli.stdout
