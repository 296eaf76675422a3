"""Where a running ``context-ledger dev`` serves, kept in ``CONTEXT_LEDGER_HOME/dev-url``.

The commands that talk to the service over HTTP (search, space, source, ingest, and the MCP
server) find it there, so ``PORT=3103 make dev`` needs no ``--url`` in another terminal of the
same home. The file is written once the API is listening and removed on a clean stop; a file left
by a killed server names a URL that no longer answers, which those commands report in one line.
"""

from __future__ import annotations

from pathlib import Path

#: the file's name inside CONTEXT_LEDGER_HOME
DEV_URL_FILE = "dev-url"
#: what the commands use without --url, CONTEXT_LEDGER_URL or a running make dev
DEFAULT_URL = "http://127.0.0.1:3000"


def write_dev_url(home: Path, url: str) -> Path:
    path = home / DEV_URL_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(url + "\n")
    return path


def remove_dev_url(home: Path, url: str) -> None:
    """Remove the file if it still names ``url`` (another server of the home may have since)."""
    path = home / DEV_URL_FILE
    if read_dev_url(home) == url:
        path.unlink(missing_ok=True)


def read_dev_url(home: Path) -> str | None:
    try:
        url = (home / DEV_URL_FILE).read_text().strip()
    except OSError:
        return None
    return url or None


def service_url(explicit: str | None, environment: str | None, home: Path) -> tuple[str, str]:
    """The service URL and where it came from: ``--url``, then ``CONTEXT_LEDGER_URL``, then the
    running ``make dev`` of this home, then the default port."""
    if explicit:
        return explicit, "--url"
    if environment:
        return environment, "CONTEXT_LEDGER_URL"
    dev = read_dev_url(home)
    if dev:
        return dev, f"the dev server's {home / DEV_URL_FILE}"
    return DEFAULT_URL, "the default"
