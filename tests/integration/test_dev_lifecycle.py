"""`context-ledger dev` and `make demo` as processes: a port in use is one line before anything
starts, and however they end (Ctrl-C, a kill, a kill while starting, a kill -9 before) nothing
of theirs is left running: no embedded PostgreSQL, no child process.

Each test runs the real command on a home of its own without ``DATABASE_URL``, so the command
starts (or attaches to) its own embedded PostgreSQL, as on a developer's machine.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from dev_support import CL, READY, ROOT, Dev, shell_env


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another server listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One home for the module's servers (a new one's initdb is the slow part of a start)."""
    return tmp_path_factory.mktemp("dev-home") / "home"


def postmaster(home: Path) -> psutil.Process | None:
    """The embedded server of the home, if one runs (its postmaster.pid names it)."""
    try:
        pid = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
        process = psutil.Process(pid)
    except (OSError, ValueError, IndexError, psutil.NoSuchProcess):
        return None
    return process if process.is_running() and "postgres" in process.name() else None


def servers_of(home: Path) -> list[psutil.Process]:
    """Every postgres process serving the home's data directory."""
    pgdata = str((home / "pgdata").resolve())
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.info["name"] == "postgres" and pgdata in cmdline:
            found.append(process)
    return found


def gone(processes: list[psutil.Process], timeout: float = 10) -> bool:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return not alive


def one_line(text: str) -> str:
    assert text.count("\n") == 1, text
    return text.strip()


def test_a_port_in_use_is_one_line_and_nothing_starts(tmp_path, taken_port) -> None:
    ran = subprocess.run(
        [CL, "dev", "--port", str(taken_port)],
        cwd=ROOT,
        env=shell_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert ran.returncode == 1
    assert ran.stdout == ""
    assert one_line(ran.stderr) == (
        f"context-ledger: port {taken_port} is in use; pick another with --port N "
        "(PORT=N for make dev and make demo)"
    )
    assert not (tmp_path / "home" / "pgdata").exists(), "no database was started"


def test_the_demo_on_a_port_in_use_is_one_line_and_never_uses_the_other_server(
    tmp_path, taken_port
) -> None:
    ran = subprocess.run(
        ["bash", "scripts/demo.sh"],
        cwd=ROOT,
        env=shell_env(tmp_path / "home", PORT=str(taken_port), DEMO_EXIT="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert ran.returncode == 1
    assert ran.stdout == ""
    assert one_line(ran.stderr).startswith(f"context-ledger: port {taken_port} is in use; ")
    assert not (tmp_path / "home" / "pgdata").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_a_running_dev_stops_its_database_and_children(home, tmp_path, signum) -> None:
    dev = Dev(shell_env(home), tmp_path / "dev.log")
    dev.wait_ready()
    server = postmaster(home)
    assert server is not None
    children = psutil.Process(dev.process.pid).children(recursive=True)

    assert dev.end(signum) == 0

    assert gone([server, *children]), "the database and every child process stopped"
    assert servers_of(home) == []
    assert not (home / "dev-url").exists()


def test_a_kill_while_starting_stops_what_was_started(tmp_path) -> None:
    """GIVEN a new home, WHEN dev is killed once its database runs but before it serves, THEN
    the database is stopped and the half-made data directory removed."""
    home = tmp_path / "new-home"
    dev = Dev(shell_env(home), tmp_path / "dev.log")
    deadline = time.monotonic() + 120
    while postmaster(home) is None:
        assert dev.process.poll() is None, dev.output()
        assert time.monotonic() < deadline, "the database never started"
        time.sleep(0.02)
    server = postmaster(home)

    status = dev.end(signal.SIGTERM)

    assert READY not in dev.output(), "killed while starting"
    assert status == 128 + signal.SIGTERM
    assert gone([server])
    assert servers_of(home) == []
    assert not (home / "pgdata").exists()


def test_a_database_left_by_a_killed_dev_is_stopped_by_the_next_one(home, tmp_path) -> None:
    """kill -9 runs no exit handler: the database stays up and the wheel still lists the dead
    process as a holder. The next dev adopts it and stops it when it ends."""
    killed = Dev(shell_env(home), tmp_path / "killed.log")
    killed.wait_ready()
    assert killed.end(signal.SIGKILL) == -signal.SIGKILL
    orphan = postmaster(home)
    assert orphan is not None, "nothing stops a database under kill -9"

    dev = Dev(shell_env(home), tmp_path / "dev.log")
    dev.wait_ready()
    assert postmaster(home).pid == orphan.pid, "the next dev attached to it"

    assert dev.end(signal.SIGTERM) == 0
    assert gone([orphan])
    assert servers_of(home) == []
