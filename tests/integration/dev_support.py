"""`context-ledger dev` run as a developer runs it: a process of its own, a shell without the
test session's variables, its output in a file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CL = str(Path(sys.executable).parent / "context-ledger")
#: the line dev prints once its API listens
READY = "context-ledger: serving on "


def shell_env(home: Path, **extra: str) -> dict[str, str]:
    """A developer's shell: none of the test session's service variables, a home of its own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KEYSTONE_", "CONTEXT_LEDGER_", "AWS_", "POWERTOOLS_"))
        and k != "DATABASE_URL"
    }
    return {**env, "CONTEXT_LEDGER_HOME": str(home), **extra}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Dev:
    """A running ``context-ledger dev [ARGS]``, its stdout and stderr in ``log``."""

    def __init__(self, env: dict[str, str], log: Path, *args: str) -> None:
        self.log = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [CL, "dev", "--port", str(self.port), *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text()

    def wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while READY not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, "dev did not start serving"
            time.sleep(0.1)

    def end(self, signum: int) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout=60)
