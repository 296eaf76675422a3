"""`context-ledger dev` searches hybrid by default: it serves the in-deployment MiniLM function
and points the stack at it with a service key it mints itself; `--embeddings none` opts out, and
an endpoint configured in the shell wins.

The servers are real processes over a database of their own on the session's PostgreSQL. What
they embed is a folder of two small files: the MiniLM forward pass is the slow part.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from dev_support import CL, Dev, shell_env

from context_ledger.db.migrate import migrate
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.local.own_embeddings import KEY_FILE, ORGANISATION, service_key
from context_ledger.local.postgres import ensure_database

HYBRID = "context-ledger: hybrid search, embeddings by this stack's EmbeddingsFunction"


@pytest.fixture
def shell(pg_server_uri: str, tmp_path: Path) -> dict[str, str]:
    """A developer's shell over a database of this test's own."""
    database = ensure_database(pg_server_uri, f"ctxl_dev_{os.getpid()}_{time.monotonic_ns()}")
    return shell_env(tmp_path / "home", DATABASE_URL=database)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    code = tmp_path / "code"
    code.mkdir()
    (code / "refunds.py").write_text(
        "def authorise_refund(order, amount):\n"
        '    """A refund is authorised when the amount is at most what was paid."""\n'
        "    return amount <= order.paid\n"
    )
    (code / "README.md").write_text(
        "# Refunds\n\nWho approves giving customers their money back.\n"
    )
    return code


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run([CL, *args], env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return ran


class Indexed:
    """An organisation whose project holds ``folder``, ingested through the dev server."""

    def __init__(self, dev: Dev, env: dict[str, str], folder: Path) -> None:
        created = cli(env, "org", "create", "Acme").stdout
        self.token = re.search(r"^ADMIN_TOKEN='?([^'\n]+)'?$", created, re.M)[1]
        self.url = dev.url
        headers = {"Authorization": f"Bearer {self.token}"}
        self.http = httpx.Client(base_url=dev.url, headers=headers, timeout=60)
        self.project = self._post("/api/v1/context/spaces", {"name": "P", "level": "project"})
        source = self._post(
            f"/api/v1/context/spaces/{self.project}/sources", {"kind": "codebase", "name": "code"}
        )
        self.ingested = cli(
            env, "ingest", str(folder), "--source", source, "--url", dev.url, "--token", self.token
        ).stdout

    def _post(self, path: str, body: dict) -> str:
        response = self.http.post(path, json=body)
        assert response.status_code == 201, response.text
        return response.json()["id"]

    def retrieve(self) -> dict:
        response = self.http.post(
            "/api/v1/context/retrieve",
            json={"query": "who may approve a refund", "spaceId": self.project},
        )
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
def running() -> Iterator[list[Dev]]:
    """The test's servers, stopped after it whatever happened."""
    started: list[Dev] = []
    yield started
    for dev in started:
        if dev.process.poll() is None:
            dev.end(signal.SIGTERM)


def start(running: list[Dev], env: dict[str, str], log: Path, *args: str) -> Dev:
    dev = Dev(env, log, *args)
    running.append(dev)
    dev.wait_ready()
    return dev


def services_organisations(env: dict[str, str]) -> int:
    with psycopg.connect(env["DATABASE_URL"]) as conn:
        row = conn.execute(
            "SELECT count(*) FROM organisations WHERE name = %s", (ORGANISATION,)
        ).fetchone()
    return row[0]


def test_dev_searches_hybrid_with_its_own_minilm_function_and_keeps_its_key(
    shell, folder, tmp_path, running
) -> None:
    dev = start(running, shell, tmp_path / "dev.log")
    indexed = Indexed(dev, shell, folder)

    answer = indexed.retrieve()
    status = indexed.http.get("/api/v1/context/status").json()

    assert HYBRID in dev.output()
    chunks = re.search(r", (\d+) chunks, .*, (\d+) embedded,", indexed.ingested)
    assert chunks[1] == chunks[2] != "0", indexed.ingested
    assert (answer["searchMode"], answer["warnings"]) == ("hybrid", [])
    assert status["embeddings"] == {
        "configured": True,
        "model": "all-MiniLM-L6-v2",
        "dimensions": 384,
        "locality": "in_deployment",
    }
    key_file = Path(shell["CONTEXT_LEDGER_HOME"]) / KEY_FILE
    assert (key_file.stat().st_mode & 0o777, services_organisations(shell)) == (0o600, 1)
    assert dev.end(signal.SIGTERM) == 0

    # What the next start does: the kept key is still known, so it is used again.
    home = Path(shell["CONTEXT_LEDGER_HOME"])
    assert service_key(shell["DATABASE_URL"], home) + "\n" == key_file.read_text()
    assert services_organisations(shell) == 1


def test_a_key_the_database_no_longer_knows_is_minted_again(shell, tmp_path) -> None:
    home = tmp_path / "home"
    (home / KEY_FILE).parent.mkdir(parents=True)
    (home / KEY_FILE).write_text("ctxl_" + "x" * 43 + "\n")
    migrate(shell["DATABASE_URL"])

    key = service_key(shell["DATABASE_URL"], home)

    assert key != "ctxl_" + "x" * 43
    assert (home / KEY_FILE).read_text() == key + "\n"
    assert services_organisations(shell) == 1


def test_embeddings_none_searches_full_text_only(shell, folder, tmp_path, running) -> None:
    dev = start(running, shell, tmp_path / "dev.log", "--embeddings", "none")

    indexed = Indexed(dev, shell, folder)

    assert "context-ledger: searching full-text only" in dev.output()
    assert ", 0 embedded," in indexed.ingested
    assert indexed.retrieve()["searchMode"] == "full_text"
    assert services_organisations(shell) == 0, "no key minted"


@pytest.fixture
def stand_in() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(0, 32) as server:
        yield server


def test_an_endpoint_configured_in_the_shell_wins(
    shell, folder, tmp_path, running, stand_in
) -> None:
    env = {
        **shell,
        "KEYSTONE_CONTEXT_EMBEDDINGS_URL": stand_in.url,
        "KEYSTONE_CONTEXT_EMBEDDINGS_MODEL": "stand-in",
    }
    dev = start(running, env, tmp_path / "dev.log")

    indexed = Indexed(dev, env, folder)

    assert "context-ledger: searching with the embeddings endpoint configured" in dev.output()
    assert indexed.retrieve()["searchMode"] == "hybrid"
    sent = [text for r in stand_in.requests for text in r.body["input"]]
    assert any("authorise_refund" in text for text in sent)
    assert services_organisations(shell) == 0


def test_source_reembed_embeds_a_full_text_source_with_the_running_stacks_own_function(
    shell, folder, tmp_path, running
) -> None:
    """Ingested with `--embeddings none`, then `context-ledger source reembed` in another
    terminal of the same home: no endpoint in the shell, so the running stack's MiniLM."""
    dev = start(running, shell, tmp_path / "dev.log", "--embeddings", "none")
    indexed = Indexed(dev, shell, folder)
    assert ", 0 embedded," in indexed.ingested

    ran = cli(shell, "source", "reembed")

    assert "all-MiniLM-L6-v2: 2 chunks to write in 1 sources" in ran.stderr
    assert re.search(r" code: 2 embedded \(0 copied\), 0 cleared$", ran.stdout, re.M), ran.stdout
    with psycopg.connect(shell["DATABASE_URL"]) as conn:
        rows = conn.execute(
            "SELECT embedding_model, embedding_dims, count(*) FROM chunks GROUP BY 1, 2"
        ).fetchall()
    assert rows == [("all-MiniLM-L6-v2", 384, 2)]
    assert "0 chunks to write" in cli(shell, "source", "reembed").stderr
