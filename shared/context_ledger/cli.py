"""The ``context-ledger`` command: local runtime, tokens, organisations, API keys, migrations,
evidence chain verification, and the service's client commands (search, space, source, ingest,
memories reembed, and the MCP server on stdio).

Every command works against ``CONTEXT_LEDGER_HOME`` (default ``.context-ledger/``), including
while ``context-ledger dev`` runs on the same home; the client commands find that server's URL
there (``dev-url``) unless ``--url`` or ``CONTEXT_LEDGER_URL`` names another.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import shlex
import sys
import uuid
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from context_ledger.settings import SettingsError, get_settings

if TYPE_CHECKING:  # the client package is imported by the commands that use it only
    from context_ledger.local.environment import LocalEnvironment
    from context_ledger.sources.upload import UploadProgress
    from context_ledger_client import ContextLedger

DEFAULT_TEMPLATE = Path("template.yaml")


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a UUID: {value}") from None


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {value}")
    return int(value)


def _cmd_migrate(_: argparse.Namespace) -> int:
    from context_ledger.local.environment import prepare_local

    prepare_local()
    print("database is up to date")
    return 0


def _cmd_dev(args: argparse.Namespace) -> int:
    from context_ledger.local.environment import prepare_local
    from context_ledger.local.lifecycle import port_in_use
    from context_ledger.local.runtime import serve

    if port_in_use(args.port):  # before the database or anything else starts
        return _port_taken(args.port)
    served: list[str] = []
    try:
        env = prepare_local()
        variables = env.variables() | _own_embeddings(args, env)
        try:
            serve(
                args.template,
                port=args.port,
                env=variables,
                on_ready=_dev_url_recorder(env.home, served),
            )
        finally:
            _forget_dev_url(env.home, served)
    except KeyboardInterrupt:  # Ctrl-C while starting: what started is stopped on the way out
        return 130
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:  # taken since the check: the runtime stopped itself
            raise
        return _port_taken(args.port)
    return 0


def _own_embeddings(args: argparse.Namespace, env: LocalEnvironment) -> dict[str, str]:
    """The variables pointing the stack at its own embeddings function (local/own_embeddings.py),
    or none: ``--embeddings none``, or an endpoint configured in the shell."""
    from context_ledger.local import own_embeddings

    configured = get_settings().embeddings_url
    if args.embeddings == "none" or configured:
        searched = "full-text only" if not configured else "with the embeddings endpoint configured"
        print(f"context-ledger: searching {searched}", flush=True)
        return {}
    key = own_embeddings.service_key(env.database_url, env.home)
    print(
        f"context-ledger: hybrid search, embeddings by this stack's EmbeddingsFunction "
        f"({own_embeddings.MODEL}); full-text only: --embeddings none (make dev EMBEDDINGS=none)",
        flush=True,
    )
    return own_embeddings.variables(port=args.port, key=key)


def _port_taken(port: int) -> int:
    print(
        f"context-ledger: port {port} is in use; pick another with --port N (PORT=N for make dev "
        "and make demo)",
        file=sys.stderr,
    )
    return 1


def _dev_url_recorder(home: Path, served: list[str]) -> Callable[[str], None]:
    """Once the API listens: records its URL in the home, for the client commands to find, and
    says so on stdout (``make demo`` waits for that line from the server it started)."""
    from context_ledger.local.dev_url import write_dev_url

    def record(url: str) -> None:
        served.append(url)
        write_dev_url(home, url)
        print(f"context-ledger: serving on {url} (home {home}); Ctrl-C stops", flush=True)

    return record


def _forget_dev_url(home: Path, served: list[str]) -> None:
    from context_ledger.local.dev_url import remove_dev_url

    for url in served:
        remove_dev_url(home, url)


def _cmd_invoke(args: argparse.Namespace) -> int:
    from context_ledger.local.environment import prepare_local
    from context_ledger.local.runtime import LocalRuntime

    env = prepare_local()
    event = json.loads(Path(args.event).read_text())
    with LocalRuntime(args.template, port=0, env=env.variables()) as runtime:
        try:
            result = runtime.invoke(args.function, event)
        except Exception as exc:  # reported like Lambda reports a function error
            print(json.dumps({"errorType": type(exc).__name__, "errorMessage": str(exc)}, indent=2))
            return 1
    print(json.dumps(result, indent=2, default=str))
    return 0


def _token(args: argparse.Namespace, *, org_id: uuid.UUID, user_id: str, scopes: list[str]) -> str:
    from context_ledger.auth.local_keys import ensure_local_keys, issue_token

    settings = get_settings()
    return issue_token(
        ensure_local_keys(settings.home.resolve()),
        issuer=settings.auth_issuer,
        audience=settings.auth_audience,
        org_id=org_id,
        user_id=user_id,
        client_id=args.client,
        scopes=frozenset(scopes),
        groups=frozenset(args.group or []),
        service=args.service,
        ttl_seconds=args.ttl,
    )


def _cmd_token(args: argparse.Namespace) -> int:
    print(_token(args, org_id=args.org, user_id=args.user, scopes=args.scope or []))
    return 0


def _cmd_org_create(args: argparse.Namespace) -> int:
    from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
    from context_ledger.db import connection
    from context_ledger.local.environment import prepare_local
    from context_ledger.spaces.service import create_organisation

    prepare_local().apply()
    with connection() as conn:
        org = create_organisation(conn, name=args.name)
    token = _token(args, org_id=org.id, user_id=args.admin_user, scopes=[SCOPE_CONTEXT_ADMIN])
    # Shell-friendly: eval "$(context-ledger org create Acme)" sets the three variables.
    print(f"ORG_ID={org.id}")
    print(f"ORG_SPACE_ID={org.space_id}")
    print(f"ADMIN_TOKEN={shlex.quote(token)}")
    return 0


def _cmd_apikey_create(args: argparse.Namespace) -> int:
    from context_ledger.auth.api_keys import create_api_key
    from context_ledger.db import connection
    from context_ledger.local.environment import prepare_local

    prepare_local().apply()
    with connection() as conn:
        issued = create_api_key(
            conn,
            org_id=args.org,
            user_id=args.user,
            name=args.name,
            scopes=frozenset(args.scope or []),
            groups=frozenset(args.group or []),
            service=args.service,
        )
    print(f"API_KEY_ID={issued.id}")
    print(f"API_KEY={issued.key}")
    return 0


def _cmd_ingest(args: argparse.Namespace) -> int:
    import httpx
    from tqdm import tqdm

    from context_ledger.sources.upload import UploadError, upload_folder

    settings = get_settings()
    token = args.token or settings.cli_token
    if not token:
        print("context-ledger: give --token or set CONTEXT_LEDGER_TOKEN", file=sys.stderr)
        return 2
    if not args.path.is_dir():
        print(f"context-ledger: not a folder: {args.path}", file=sys.stderr)
        return 2
    with tqdm(
        unit="B", unit_scale=True, desc="indexing", file=sys.stderr, bar_format=_INGEST_BAR
    ) as bar:
        try:
            report = upload_folder(
                args.path,
                source_id=args.source,
                url=_service_url(args)[0],
                token=token,
                max_file_bytes=args.max_file_bytes,
                progress=functools.partial(_show_progress, bar),
            )
        except UploadError as exc:
            if isinstance(exc.__cause__, httpx.TransportError):
                return _unreachable(args, str(exc))
            print(f"context-ledger: {exc}", file=sys.stderr)
            return 1
    skipped = report.skipped
    print(
        f"published index version {report.version}: {report.files} files "
        f"({report.bytes / 1e6:.1f} MB), {report.chunks} chunks, {report.tokens} tokens, "
        f"{report.edges} edges, {report.embedded} embedded, {report.seconds:.1f} s; skipped "
        f"{skipped.binary} binary, {skipped.too_large} too large, {skipped.unreadable} unreadable, "
        f"{skipped.bad_name} with a name that is not UTF-8 or over 1,024 characters"
    )
    for name in skipped.bad_names:
        print(f"  skipped for its name: {name}")
    return 0


#: The ingest's progress: bytes stored (chunked, embedded) of the folder's, the ETA at that rate,
#: then files and chunks.
_INGEST_BAR = (
    "{desc}: {percentage:3.0f}%|{bar:20}| {n_fmt}B/{total_fmt}B [{elapsed}<{remaining}{postfix}]"
)


def _show_progress(bar: Any, progress: UploadProgress) -> None:
    bar.total = progress.total_bytes
    chunks = f"{progress.chunks:,} chunks"
    if progress.files < progress.total_files:
        chunks += f" of ~{progress.expected_chunks:,}" if progress.chunks else ""
    bar.set_postfix_str(
        f"{progress.files:,}/{progress.total_files:,} files, {chunks}, "
        f"{progress.embedded:,} embedded",
        refresh=False,
    )
    if progress.bytes > bar.n:
        bar.update(progress.bytes - bar.n)
    else:  # the listing, before a batch: the totals are known already
        bar.refresh()


def _cmd_source_reembed(args: argparse.Namespace) -> int:
    """Re-embed the published chunks not embedded with the configured model (sources/reembed.py),
    on the database this home's commands use, with a progress bar of chunks and an ETA."""
    from tqdm import tqdm

    from context_ledger.db import autocommit, connection
    from context_ledger.dlp.gate import open_gate
    from context_ledger.embeddings.client import client_from_settings
    from context_ledger.errors import ServiceUnavailableError
    from context_ledger.local.environment import prepare_local
    from context_ledger.sources import reembed

    env = prepare_local()
    env.apply()
    _dev_stack_embeddings(env)
    settings = get_settings()
    client = client_from_settings(settings)
    if client is None:
        print(
            "context-ledger: no embeddings endpoint: set KEYSTONE_CONTEXT_EMBEDDINGS_URL and "
            "_MODEL (and _DIMENSIONS, _API_KEY), or start `make dev` on this home",
            file=sys.stderr,
        )
        return 2
    results: list[reembed.Reembedded] = []
    with connection() as conn, autocommit(conn):
        sources = reembed.stale_sources(
            conn,
            model=client.model,
            dimensions=client.dimensions,
            org_id=args.org,
            source_id=args.source,
        )
        gates = {
            org: open_gate(conn, org_id=org, client=client, settings=settings)
            for org in {source.org_id for source in sources}
        }
        work = [reembed.work_of(source, gates[source.org_id]) for source in sources]
        print(
            f"{client.model}: {sum(work):,} chunks to write in {len(sources)} sources",
            file=sys.stderr,
        )
        if args.dry_run:
            for source, chunks in zip(sources, work, strict=True):
                print(f"{source.id} {source.name}: {source.stale:,} stale, {chunks:,} to write")
            return 0
        bar = tqdm(total=sum(work), unit="chunk", desc="re-embedding", file=sys.stderr)
        try:
            for number, source in enumerate(sources, 1):
                bar.set_postfix_str(f"source {number}/{len(sources)}", refresh=False)
                results.append(
                    reembed.reembed_source(
                        conn,
                        source,
                        gate=gates[source.org_id],
                        batch_size=args.batch_size,
                        progress=bar.update,
                    )
                )
        except (ServiceUnavailableError, KeyboardInterrupt) as exc:
            bar.close()
            reason = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
            print(
                f"context-ledger: stopped ({reason}) after {bar.n:,} chunks, which stay "
                "written; run the command again to go on",
                file=sys.stderr,
            )
            return 130 if isinstance(exc, KeyboardInterrupt) else 1
        bar.close()
    for done in results:
        held = f", full-text only ({done.refusal})" if done.refusal else ""
        print(
            f"{done.source.id} {done.source.name}: {done.embedded:,} embedded "
            f"({done.reused:,} copied), {done.cleared:,} cleared{held}"
        )
    print(f"{len(results)} sources brought to {client.model}")
    return 0


def _dev_stack_embeddings(env: LocalEnvironment) -> None:
    """No endpoint configured and a `make dev` of this home running: its own embeddings
    function, as `dev` points the stack at it (local/own_embeddings.py)."""
    import os
    from urllib.parse import urlsplit

    from context_ledger.local import own_embeddings
    from context_ledger.local.dev_url import read_dev_url

    dev_url = read_dev_url(env.home)
    if get_settings().embeddings_url or not dev_url or urlsplit(dev_url).port is None:
        return
    key = own_embeddings.service_key(env.database_url, env.home)
    os.environ.update(own_embeddings.variables(port=urlsplit(dev_url).port, key=key))
    get_settings.cache_clear()


#: Re-embedding's progress: memories done (by this command and the background job alike) of the
#: backlog when it started, the ETA at that rate, then the rate.
_REEMBED_BAR = (
    "{desc}: {percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt} memories "
    "[{elapsed}<{remaining}, {rate_fmt}{postfix}]"
)
#: Calls in a row that re-embed nothing while memories remain (another worker holds them) before
#: the command leaves them to it.
_REEMBED_IDLE_CALLS = 10
#: One step embeds a batch with the service's model: on a loaded CPU, more than a read takes.
_REEMBED_TIMEOUT_SECONDS = 60.0


def _cmd_memories_reembed(args: argparse.Namespace) -> int:
    """Re-embed the memories whose vector is of another model, through the service (its
    configured model, its DLP gate), a bounded share per call until none remains."""
    import time

    from tqdm import tqdm

    started = time.monotonic()
    done = idle = 0
    with (
        _api_client(args, timeout=_REEMBED_TIMEOUT_SECONDS) as client,
        tqdm(unit="memories", desc="re-embedding", file=sys.stderr, bar_format=_REEMBED_BAR) as bar,
    ):
        while True:
            answer = client.reembed_memories(project=args.project, limit=args.batch)
            done += answer.reembedded
            remaining = answer.remaining
            if bar.total is None or bar.n + remaining > bar.total:
                bar.total = (bar.n if bar.total is not None else done) + remaining
            bar.update(max(bar.total - remaining - bar.n, 0))
            bar.set_postfix_str(answer.model, refresh=True)
            if not remaining:
                break
            idle = 0 if answer.reembedded else idle + 1
            if idle >= _REEMBED_IDLE_CALLS:
                break
            if idle:
                time.sleep(1.0)  # another worker holds the rest: let it finish its batch
    seconds = time.monotonic() - started
    rate = f" ({done / seconds:.1f} memories/s)" if done and seconds > 0 else ""
    line = f"re-embedded {done:,} memories with {answer.model} in {seconds:.1f} s{rate}"
    if answer.remaining:
        line += f"; {answer.remaining:,} remain, held by another worker (the background job)"
    if answer.withheld:
        line += (
            f"; {answer.withheld:,} withheld: the DLP policy keeps their content from the "
            "embeddings endpoint"
        )
    print(line)
    return 0


def _cmd_embeddings_server(args: argparse.Namespace) -> int:
    from context_ledger.local.embeddings_server import main as serve_embeddings

    argv = ["--port", str(args.port), "--dimensions", str(args.dimensions)]
    argv += ["--provider", args.provider]
    argv += ["--model-dir", str(args.model_dir)] if args.model_dir else []
    return serve_embeddings(argv + (["--api-key", args.api_key] if args.api_key else []))


def _cmd_provider_server(args: argparse.Namespace) -> int:
    from context_ledger.local.provider_server import main as serve_provider

    argv = ["--port", str(args.port)]
    return serve_provider(argv + (["--api-key", args.api_key] if args.api_key else []))


def _cmd_verify(args: argparse.Namespace) -> int:
    from context_ledger.attribution.index_check import check_lookup_rows
    from context_ledger.db import connection
    from context_ledger.evidence.chain import org_chain
    from context_ledger.evidence.keys import get_key_ring
    from context_ledger.evidence.verify_job import list_chains, verify_chain
    from context_ledger.local.environment import prepare_local

    prepare_local().apply()
    keys = get_key_ring()
    if args.org is not None:
        chains = [org_chain(args.org)]
    else:
        with connection() as conn:
            chains = list_chains(conn)
    failed = 0
    for chain in chains:
        with connection() as conn:
            verified = verify_chain(
                conn, chain=chain, keys=keys, full=args.full, index_check=check_lookup_rows
            )
        checked = verified.result.checked
        if verified.ok:
            print(f"{chain}: ok, {checked} entries checked")
        else:
            failed += 1
            print(
                f"{chain}: FAILED at seq {verified.first_bad_seq} ({verified.reason}), "
                f"{checked} entries checked"
            )
            for problem in verified.index_problems:
                print(f"  {problem.table} {problem.key} (seq {problem.seq}): {problem.problem}")
    print(f"{len(chains)} chains verified, {failed} failed")
    return 1 if failed else 0


def _service_url(args: argparse.Namespace) -> tuple[str, str]:
    from context_ledger.local.dev_url import service_url

    settings = get_settings()
    return service_url(args.url, settings.cli_url, settings.home)


def _api_client(args: argparse.Namespace, *, timeout: float | None = None) -> ContextLedger:
    """The client package's client at the resolved URL with the CLI's credential, named
    ``context-ledger-cli/<version>`` in each retrieval's evidence record."""
    from context_ledger_client import ContextLedger

    token = args.token or get_settings().cli_token
    if not token:
        raise _UsageError("give --token or set CONTEXT_LEDGER_TOKEN")
    client_name = f"context-ledger-cli/{version('context-ledger')}"
    options = {} if timeout is None else {"timeout": timeout}
    return ContextLedger(_service_url(args)[0], token, client_name=client_name, **options)


class _UsageError(Exception):
    """A client command was called without what it needs (exit status 2)."""


def _client_command(
    run: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """A command over the HTTP API: every failure is one line on stderr, exit 1 (2 for usage),
    never a traceback; a service that cannot be reached names the URL and how to change it."""

    def wrapped(args: argparse.Namespace) -> int:
        from context_ledger_client import ContextLedgerError, ServiceUnreachableError

        try:
            return run(args)
        except _UsageError as exc:
            print(f"context-ledger: {exc}", file=sys.stderr)
            return 2
        except ServiceUnreachableError as exc:
            return _unreachable(args, exc.reason)
        except ContextLedgerError as exc:
            print(f"context-ledger: {exc}", file=sys.stderr)
            return 1

    return wrapped


def _unreachable(args: argparse.Namespace, reason: str) -> int:
    url, where = _service_url(args)
    print(
        f"context-ledger: cannot reach {url} (from {where}: {reason}); start "
        "`make dev`, or point --url or CONTEXT_LEDGER_URL at the service",
        file=sys.stderr,
    )
    return 1


def _cmd_search(args: argparse.Namespace) -> int:
    from context_ledger_client import retrieval_table

    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else None
    with _api_client(args) as client:
        result = client.retrieve(
            args.query, space_id=args.space, token_budget=args.budget, source_kinds=kinds
        )
    print(json.dumps(result.raw, indent=2) if args.json else retrieval_table(result))
    return 0


def _cmd_space_create(args: argparse.Namespace) -> int:
    with _api_client(args) as client:
        space = client.create_space(args.name, level=args.level, parent_id=args.parent)
    # Shell-friendly, like `org create`: eval "$(context-ledger space create ...)" sets SPACE_ID.
    print(f"SPACE_ID={space.id}")
    return 0


def _cmd_source_create(args: argparse.Namespace) -> int:
    with _api_client(args) as client:
        source = client.create_source(
            args.space, args.name, kind=args.kind, classification=args.classification
        )
    print(f"SOURCE_ID={source.id}")
    return 0


def _cmd_mcp(args: argparse.Namespace) -> int:
    """The MCP server on stdio; nothing but the protocol may reach stdout."""
    from context_ledger.mcp.stdio import serve_stdio

    token = args.token or get_settings().cli_token
    if not token:
        raise _UsageError("give --token or set CONTEXT_LEDGER_TOKEN")
    serve_stdio(_service_url(args)[0], token)
    return 0


def _client_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", help="service URL (default CONTEXT_LEDGER_URL, else the running make dev)"
    )
    parser.add_argument(
        "--token", help="bearer JWT or ctxl_ API key (default CONTEXT_LEDGER_TOKEN)"
    )


def _add_client_commands(commands: argparse._SubParsersAction) -> None:
    search = commands.add_parser("search", help="retrieve context and print the ranked chunks")
    search.add_argument("query")
    search.add_argument("--space", help="space id (default: the organisation and personal spaces)")
    search.add_argument("--kinds", help="source kinds, comma-separated (codebase,docs,...)")
    search.add_argument("--budget", type=int, help="token budget (default 4096)")
    search.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    _client_options(search)
    search.set_defaults(run=_client_command(_cmd_search))

    space = commands.add_parser("space", help="spaces").add_subparsers(
        dest="space_command", required=True
    )
    space_create = space.add_parser("create", help="create a space; print SPACE_ID=...")
    space_create.add_argument("name")
    space_create.add_argument("--level", required=True, help="team, project, department, ...")
    space_create.add_argument("--parent", help="parent space id (default: the organisation)")
    _client_options(space_create)
    space_create.set_defaults(run=_client_command(_cmd_space_create))

    source = commands.add_parser("source", help="sources").add_subparsers(
        dest="source_command", required=True
    )
    source_create = source.add_parser("create", help="create a source; print SOURCE_ID=...")
    source_create.add_argument("name")
    source_create.add_argument("--space", required=True, help="space id")
    source_create.add_argument("--kind", required=True, help="codebase, docs, issues, ...")
    source_create.add_argument("--classification", help="public, internal (default), ...")
    _client_options(source_create)
    source_create.set_defaults(run=_client_command(_cmd_source_create))
    source_reembed = source.add_parser(
        "reembed",
        help="embed the chunks not embedded with the configured model (after a model change), "
        "on the local database or DATABASE_URL",
    )
    source_reembed.add_argument("--source", type=_uuid, help="only this source")
    source_reembed.add_argument("--org", type=_uuid, help="only this organisation's sources")
    source_reembed.add_argument("--batch-size", type=_positive, default=64, help="chunks a batch")
    source_reembed.add_argument("--dry-run", action="store_true", help="count, write nothing")
    source_reembed.set_defaults(run=_cmd_source_reembed)

    mcp = commands.add_parser(
        "mcp", help="serve the MCP tools on stdio, for an agent (Claude Code, Cursor, ...)"
    )
    _client_options(mcp)
    mcp.set_defaults(run=_client_command(_cmd_mcp))


def _identity_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--org", type=_uuid, required=True, help="organisation id")
    parser.add_argument("--user", required=True, help="user id (the token's sub)")
    parser.add_argument("--scope", action="append", help="a scope, e.g. context:admin (repeat)")
    parser.add_argument("--group", action="append", help="a group the user belongs to (repeat)")
    parser.add_argument("--service", action="store_true", help="a service, not a person")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="context-ledger", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    dev = commands.add_parser("dev", help="serve template.yaml locally (API, queues, schedules)")
    dev.add_argument("--port", type=int, default=3000)
    dev.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    dev.add_argument(
        "--embeddings",
        choices=("minilm", "none"),
        default="minilm",
        help="minilm: hybrid search with the stack's own embeddings function (default); "
        "none: full-text only",
    )
    dev.set_defaults(run=_cmd_dev)

    commands.add_parser("migrate", help="apply pending database migrations").set_defaults(
        run=_cmd_migrate
    )

    invoke = commands.add_parser("invoke", help="invoke one function with an event file")
    invoke.add_argument("function", help="logical id or folder name, e.g. SpacesFunction, spaces")
    invoke.add_argument("event", type=Path, help="event JSON file, e.g. events/spaces-list.json")
    invoke.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    invoke.set_defaults(run=_cmd_invoke)

    ingest = commands.add_parser("ingest", help="index a folder or git checkout into a source")
    ingest.add_argument("path", type=Path, help="folder or git checkout")
    ingest.add_argument("--source", type=_uuid, required=True, help="source id")
    ingest.add_argument("--url", help="service URL (default CONTEXT_LEDGER_URL or local)")
    ingest.add_argument("--token", help="bearer token (default CONTEXT_LEDGER_TOKEN)")
    ingest.add_argument("--max-file-bytes", type=int, default=1_000_000, help="skip larger files")
    ingest.set_defaults(run=_cmd_ingest)

    memories = commands.add_parser("memories", help="agent memories").add_subparsers(
        dest="memories_command", required=True
    )
    reembed = memories.add_parser(
        "reembed",
        help="re-embed memories whose vector is of another model than the configured one, "
        "with progress",
    )
    reembed.add_argument("--project", help="only this project key (default: every project)")
    reembed.add_argument(
        "--batch", type=int, default=64, help="memories per request to the service (1-1000)"
    )
    _client_options(reembed)
    reembed.set_defaults(run=_client_command(_cmd_memories_reembed))

    embeddings = commands.add_parser(
        "embeddings-server", help="serve OpenAI-compatible embeddings on 127.0.0.1"
    )
    embeddings.add_argument("--port", type=int, default=8089)
    embeddings.add_argument(
        "--provider", choices=("hashing", "minilm"), default="hashing", help="what to serve"
    )
    embeddings.add_argument("--dimensions", type=int, default=128, help="hashing: default size")
    embeddings.add_argument("--model-dir", type=Path, help="minilm: model folder (default: wheel)")
    embeddings.add_argument("--api-key", help="require this bearer key")
    embeddings.set_defaults(run=_cmd_embeddings_server)

    provider = commands.add_parser(
        "provider-server", help="serve an OpenAI-compatible echo model (gateway stand-in)"
    )
    provider.add_argument("--port", type=int, default=8090)
    provider.add_argument("--api-key", help="require this bearer key")
    provider.set_defaults(run=_cmd_provider_server)

    token = commands.add_parser("token", help="print a token the local authorizer accepts")
    _identity_options(token)
    token.add_argument("--client", default="context-ledger-cli", help="OAuth client id")
    token.add_argument("--ttl", type=int, default=12 * 3600, help="lifetime in seconds")
    token.set_defaults(run=_cmd_token)

    org = commands.add_parser("org", help="organisations").add_subparsers(
        dest="org_command", required=True
    )
    org_create = org.add_parser("create", help="create an organisation; print an admin token")
    org_create.add_argument("name")
    org_create.add_argument("--admin-user", default="admin", help="user id of the admin token")
    org_create.add_argument("--client", default="context-ledger-cli")
    org_create.add_argument("--ttl", type=int, default=12 * 3600)
    org_create.set_defaults(run=_cmd_org_create, group=None, service=False)

    apikey = commands.add_parser("apikey", help="API keys").add_subparsers(
        dest="apikey_command", required=True
    )
    apikey_create = apikey.add_parser("create", help="create an API key; print it once")
    _identity_options(apikey_create)
    apikey_create.add_argument("--name", default="", help="a label for the key")
    apikey_create.set_defaults(run=_cmd_apikey_create)

    verify = commands.add_parser(
        "verify", help="verify evidence chains in the local database; exit 1 if one fails"
    )
    verify.add_argument("--org", type=_uuid, help="only this organisation's chain")
    verify.add_argument("--full", action="store_true", help="from seq 1, not the last checkpoint")
    verify.set_defaults(run=_cmd_verify)

    _add_client_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    from context_ledger.local.lifecycle import ended_by_signals

    args = build_parser().parse_args(argv)
    try:
        get_settings()
        with ended_by_signals():  # a `kill` runs the exit handlers (the database's stop)
            return args.run(args)
    except SettingsError as exc:
        print(f"context-ledger: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
