"""The CLI's client commands (search, space create, source create) through the real local
runtime, how they find the service (--url, CONTEXT_LEDGER_URL, the running dev server's
``dev-url``), and their one-line failures."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from api_support import clean_env, empty_database, free_port

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger_client import ContextLedger

ROOT = Path(__file__).resolve().parents[2]
CL = str(Path(sys.executable).parent / "context-ledger")
CODE = '''def authorise_refund(order, amount):
    """A refund is authorised when the amount is at most what was paid."""
    return amount <= order.paid and check_fraud(order)


def check_fraud(order):
    return order.score < 0.8
'''


def run_cl(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``context-ledger ARGV`` as a person runs it (the session runtime's logs go to this
    process's stdout, so the commands run in their own)."""
    return subprocess.run(
        [CL, *argv],
        env=env if env is not None else clean_env(Path("/nonexistent-home")),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def indexed_project(url: str, admin: str, folder: Path) -> tuple[str, str]:
    """A team with a project holding an indexed codebase; (team id, project id)."""
    (folder / "refunds.py").write_text(CODE)
    with ContextLedger(url, admin) as cl:
        team = cl.create_space("Payments", level="team")
        project = cl.create_space("Billing", level="project", parent_id=team.id)
        source = cl.create_source(project.id, "billing code", kind="codebase")
        cl.index_folder(source.id, folder)
    return team.id, project.id


def test_search_prints_the_ranked_chunks_and_json_prints_the_answer(
    runtime, org, token, tmp_path
) -> None:
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    _, project = indexed_project(runtime.url, admin, tmp_path)
    where = ["--url", runtime.url, "--token", admin]

    shown = run_cl("search", "authorise refund", "--space", project, "--budget", "500", *where)
    as_json = run_cl("search", "authorise refund", "--space", project, "--json", *where)

    assert shown.returncode == 0, shown.stderr
    table = shown.stdout.splitlines()
    answer = json.loads(as_json.stdout)
    header = ["path:lines", "(symbol", "or", "heading)", "level", "score", "tokens", "related"]
    assert table[0].split() == header
    assert table[1].split()[:3] == ["refunds.py:1-3", "(authorise_refund)", "project"]
    assert float(table[1].split()[3]) > 0
    assert table[2].split()[:2] == ["refunds.py:6-7", "(check_fraud)"]
    assert table[2].split()[-1] == "calls"  # related code, marked
    assert table[-1].startswith("tokensUsed ")
    assert "attributionId " in table[-1]
    assert [c["path"] for c in answer["chunks"]] == ["refunds.py", "refunds.py"]
    assert set(answer) >= {"chunks", "requestId", "attributionId", "tokensUsed", "sourcesSummary"}


def test_search_kinds_restrict_the_sources(runtime, org, token, tmp_path) -> None:
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    _, project = indexed_project(runtime.url, admin, tmp_path)
    where = ["--url", runtime.url, "--token", admin]

    docs = run_cl("search", "refund", "--space", project, "--kinds", "docs,issues", *where)
    bad = run_cl("search", "refund", "--space", project, "--kinds", "nonsense", *where)

    assert (docs.returncode, bad.returncode) == (0, 1)
    docs_only, refused = docs.stdout.splitlines(), bad.stderr

    # the header, the totals and why nothing came: no codebase chunk
    assert len(docs_only) == 3
    assert docs_only[2].startswith("warning: no source was searched: the spaces searched ")
    assert refused.startswith("context-ledger: 422 validation_failed: ")
    assert len(refused.splitlines()) == 1


def test_space_and_source_create_print_their_ids(runtime, org, token) -> None:
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    where = ["--url", runtime.url, "--token", admin]

    team = run_cl("space", "create", "Payments", "--level", "team", *where).stdout
    team = team.strip().removeprefix("SPACE_ID=")
    project = run_cl("space", "create", "Billing", "--level", "project", "--parent", team, *where)
    project = project.stdout.strip().removeprefix("SPACE_ID=")
    create_source = ["source", "create", "billing docs", "--space", project, "--kind", "docs"]
    source = run_cl(*create_source, "--classification", "confidential", *where).stdout
    source = source.strip().removeprefix("SOURCE_ID=")

    with ContextLedger(runtime.url, admin) as cl:
        assert cl.space(project).parent_id == team
        assert cl.space(team).level == "team"
        [created] = cl.sources(project)
    assert (created.id, created.kind, created.classification) == (source, "docs", "confidential")


def test_a_denied_space_and_a_bad_credential_are_one_line_each(runtime, org, token):
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    with ContextLedger(runtime.url, admin) as cl:
        team = cl.create_space("Payments", level="team")

    mallory = token(org, "mallory")
    hidden = run_cl(
        "search", "refunds", "--space", team.id, "--url", runtime.url, "--token", mallory
    )
    bad = run_cl("space", "create", "X", "--level", "team", "--url", runtime.url, "--token", "x")

    assert (hidden.returncode, bad.returncode) == (1, 1)
    denied, unauthenticated = hidden.stderr, bad.stderr
    assert denied == "context-ledger: 404 context.space.not_found: space not found\n"
    assert unauthenticated.startswith("context-ledger: 401 ")
    assert len(unauthenticated.splitlines()) == 1


def test_without_a_token_the_command_says_how_to_give_one(runtime) -> None:
    ran = run_cl("search", "refunds", "--url", runtime.url)
    assert ran.returncode == 2
    assert ran.stderr == "context-ledger: give --token or set CONTEXT_LEDGER_TOKEN\n"


def test_a_server_that_cannot_be_reached_is_one_line_naming_the_url(tmp_path) -> None:
    port = free_port()
    env = clean_env(tmp_path, CONTEXT_LEDGER_URL=f"http://127.0.0.1:{port}")

    ran = subprocess.run(
        [CL, "search", "refunds", "--token", "ctxl_x"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert ran.returncode == 1
    assert ran.stdout == ""
    [line] = ran.stderr.splitlines()
    assert f"cannot reach http://127.0.0.1:{port} (from CONTEXT_LEDGER_URL" in line
    assert "--url or CONTEXT_LEDGER_URL" in line


def test_ingest_against_a_server_that_cannot_be_reached_is_one_line(tmp_path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    url = f"http://127.0.0.1:{free_port()}"
    source = "00000000-0000-4000-8000-000000000000"

    ran = run_cl("ingest", str(tmp_path), "--source", source, "--url", url, "--token", "ctxl_x")

    assert ran.returncode == 1
    assert "Traceback" not in ran.stderr
    [line] = [line for line in ran.stderr.splitlines() if "context-ledger:" in line]
    assert f"cannot reach {url} (from --url: " in line
    assert "ConnectError" in line
    assert line.endswith("point --url or CONTEXT_LEDGER_URL at the service")


def test_show_retrieval_prints_what_search_prints(runtime, org, token, tmp_path) -> None:
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    _, project = indexed_project(runtime.url, admin, tmp_path)
    with ContextLedger(runtime.url, admin) as cl:
        answer = cl.retrieve("authorise refund", space_id=project)

    where = ["--space", project, "--url", runtime.url, "--token", admin]
    printed = run_cl("search", "authorise refund", *where).stdout
    shown = subprocess.run(
        [sys.executable, str(ROOT / "scripts/show_retrieval.py")],
        input=json.dumps(dict(answer.raw)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    # the same chunks (the search cache answers the second within 60 s); ids differ per request
    assert shown.stdout.splitlines()[:-1] == printed.splitlines()[:-1]


def test_importing_the_cli_does_not_need_the_client_package() -> None:
    # The CLI ships in the Lambda layer; only its client commands import the client package.
    code = (
        "import sys, context_ledger.cli as c; c.build_parser();"
        " assert 'context_ledger_client' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.fixture
def dev_home(tmp_path: Path, database_url: str):
    """A home of its own over the test database; the test's rows are removed after it."""
    yield tmp_path / "home", database_url
    empty_database(database_url)


def test_make_dev_records_its_url_and_the_commands_use_it(dev_home) -> None:
    home, database_url = dev_home
    env = clean_env(home, DATABASE_URL=database_url)
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def cl(*argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CL, *argv], env={**env, **extra}, capture_output=True, text=True, timeout=120
        )

    server = subprocess.Popen(
        [CL, "dev", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not (home / "dev-url").exists():
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "dev did not record its URL"
            time.sleep(0.2)
        assert (home / "dev-url").read_text() == url + "\n"
        created = cl("org", "create", "Acme")
        assert created.returncode == 0, created.stderr
        values = dict(line.split("=", 1) for line in created.stdout.splitlines())
        admin = values["ADMIN_TOKEN"].strip("'")

        made = cl("space", "create", "Payments", "--level", "team", CONTEXT_LEDGER_TOKEN=admin)
        searched = cl("search", "refunds", "--json", CONTEXT_LEDGER_TOKEN=admin)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)

    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("SPACE_ID=")
    assert searched.returncode == 0, searched.stderr
    assert json.loads(searched.stdout)["chunks"] == []
    assert not (home / "dev-url").exists()  # removed on a clean stop
