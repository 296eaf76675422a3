"""``pip install ./clients/python`` into a fresh venv brings httpx and its own dependencies, none
of the server's, and the package imports and works there. pip's cache is reused, so a second run
takes seconds; a failure to create the venv or install is a failure, never a skip."""

from __future__ import annotations

import json
import shutil
import subprocess
import venv
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
SERVER_DISTRIBUTIONS = {"boto3", "botocore", "psycopg", "psycopg-binary", "fastapi", "mangum"}

INSPECT = """
import importlib.metadata as md, json, sys
import context_ledger_client
from context_ledger_client import ContextLedger, AsyncContextLedger, retrieval_table
names = sorted(d.metadata["Name"].lower().replace("_", "-") for d in md.distributions())
requires = md.requires("context-ledger-client") or []
print(json.dumps({"names": names, "requires": requires,
                  "version": context_ledger_client.__version__,
                  "modules": sorted(m.split(".")[0] for m in sys.modules)}))
"""


def test_the_client_installs_into_a_fresh_venv_without_the_servers_dependencies(tmp_path) -> None:
    # installed from a copy: a non-editable install builds in the tree it is given (build/)
    client = shutil.copytree(CLIENT, tmp_path / "client", ignore=shutil.ignore_patterns("build"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"

    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(client)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    inspected = subprocess.run(
        [str(python), "-c", INSPECT], capture_output=True, text=True, timeout=60, check=False
    )
    assert inspected.returncode == 0, inspected.stderr[-3000:]
    found = json.loads(inspected.stdout)

    assert found["version"] == "0.1.0"
    names = set(found["names"])
    required = [r for r in found["requires"] if "extra ==" not in r]
    assert [r.split("<")[0].split(">")[0].strip() for r in required] == ["httpx"]
    assert not {"langchain-core", "llama-index-core"} & names  # optional extras only
    assert {"context-ledger-client", "httpx"} <= names
    assert not names & SERVER_DISTRIBUTIONS
    assert not {n for n in names if n.startswith(("tree-sitter", "psycopg"))}
    assert "context-ledger" not in names
    assert not {"boto3", "psycopg", "fastapi", "tree_sitter"} & set(found["modules"])
