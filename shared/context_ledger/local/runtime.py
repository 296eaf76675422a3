"""The SAM template served on one machine: ``sam local start-api`` without Docker.

:class:`LocalRuntime` reads the template, creates its queues on an SQS endpoint (moto's SQS,
local/sqs_server.py, started here unless one is given), sets the functions' environment, and
then serves the HTTP API, polls the queues into their functions and fires schedules, all calling
the same ``handler`` objects Lambda calls, in this process.

All functions share one process, so their environment is merged into ``os.environ`` once at
start: the template's variables (``Globals`` plus each function's; parameters take their defaults,
queue references become the local queues, values only AWS knows are dropped), then the shell's
value of each variable the template sets straight from a parameter (what a deployment passes as a
parameter, a developer passes in the shell: ``KEYSTONE_MODELS_PROVIDER_URL=... make dev``), then
the local defaults (region, dummy credentials, so nothing reaches a real AWS account; tracing
off, as no X-Ray daemon listens), then the caller's ``env``, then ``AWS_ENDPOINT_URL_SQS``.
``stop`` puts the previous values back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
import secrets
import signal
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import boto3

from context_ledger.db import close_pool
from context_ledger.local.events import ApiInfo
from context_ledger.local.gateway import Gateway
from context_ledger.local.invoker import Invoker
from context_ledger.local.queues import (
    DeliveryCounts,
    LocalQueue,
    QueuePoller,
    create_queues,
    delete_queues,
)
from context_ledger.local.routes import RouteTable
from context_ledger.local.schedules import Scheduler
from context_ledger.local.server import LocalHttpServer
from context_ledger.local.sqs_server import serve_sqs
from context_ledger.local.template import environment_of, read_template
from context_ledger.settings import get_settings

logger = logging.getLogger(__name__)

DEFAULT_REGION = "us-east-1"
_DUMMY_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
#: No X-Ray daemon listens here. Outside Lambda (no LAMBDA_TASK_ROOT) nothing is traced anyway
#: (settings.xray_tracing); this also covers a shell that looks like Lambda's, so no function
#: sends a segment or logs a missing one.
_NO_TRACING = {"POWERTOOLS_TRACE_DISABLED": "true"}


class LocalRuntime:
    """The template's HTTP API, queues and schedules on loopback; usable as a context manager."""

    def __init__(
        self,
        template_path: Path,
        *,
        port: int = 3000,
        env: Mapping[str, str],
        sqs_endpoint: str | None = None,
        timed_schedules: bool = True,
        start_up: bool = False,
    ) -> None:
        """``timed_schedules=False``: schedules fire only on demand (:meth:`fire`), so a test
        session's answers do not depend on when a minutely schedule happened to run.
        ``start_up``: also fire the schedules the template's ``LocalFireAtStart`` lists, once,
        when serving starts (``context-ledger dev`` does; local/schedules.py)."""
        self.template = read_template(Path(template_path))
        self._timed_schedules = timed_schedules
        self._start_up = start_up
        self._port = port
        self._env = dict(env)
        self._sqs_endpoint = sqs_endpoint
        self.region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
        self._invoker = Invoker(dict(self.template.functions), region=self.region)
        self._scheduler = Scheduler(
            self.template.functions.values(), self._invoker.invoke, region=self.region
        )
        self._state = "new"
        self._url: str | None = None
        self._local_sqs = contextlib.ExitStack()
        self._sqs: Any = None
        self._queues: dict[str, LocalQueue] = {}
        self._pollers: list[QueuePoller] = []
        self._http: LocalHttpServer | None = None
        self._applied_env: dict[str, str] = {}
        self._previous_env: dict[str, str | None] = {}

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._state != "new":
            raise RuntimeError("a LocalRuntime starts once")
        self._state = "started"
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop serving, polling and firing; delete the queues; restore the environment."""
        if self._state != "started":
            return
        self._state = "stopped"
        if self._http is not None:
            self._http.stop()
        self._scheduler.stop()
        for poller in self._pollers:
            poller.request_stop()
        for poller in self._pollers:
            poller.join()
        if self._sqs is not None:
            delete_queues(self._sqs, self._queues)
        self._local_sqs.close()
        self._invoker.unload()
        self._restore_environment()
        logger.info("local runtime stopped")

    def __enter__(self) -> LocalRuntime:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # --- use -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The HTTP API's base URL (``http://127.0.0.1:<port>``), once started."""
        if self._url is None:
            raise RuntimeError("the runtime is not started")
        return self._url

    @property
    def sqs_endpoint(self) -> str:
        if self._sqs_endpoint is None:
            raise RuntimeError("the runtime is not started")
        return self._sqs_endpoint

    def queue_url(self, logical_id: str) -> str:
        """The local URL of a template queue, by logical id."""
        return self._queues[logical_id].url

    def delivery_counts(self, logical_id: str) -> DeliveryCounts:
        """What this runtime's pollers of a template queue received, and how much of it again."""
        total = DeliveryCounts()
        for poller in self._pollers:
            if poller.queue.logical_id == logical_id:
                total.received += poller.counts.received
                total.redelivered += poller.counts.redelivered
        return total

    def invoke(self, function_name: str, event: dict[str, Any]) -> Any:
        """Invoke a function (logical id or CodeUri folder) with ``event``; returns its result."""
        self._require_started()
        return self._invoker.invoke(self.template.function(function_name).logical_id, event)

    def fire(self, function_name: str, schedule: str | None = None) -> Any:
        """Fire a function's schedule now (name the event if it has several); returns the result."""
        self._require_started()
        return self._scheduler.fire(self.template.function(function_name), schedule)

    # --- internals -------------------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._state != "started":
            raise RuntimeError("the runtime is not running")

    def _start(self) -> None:
        endpoint = self._sqs_endpoint or self._start_sqs()
        self._sqs_endpoint = endpoint
        credentials = {**_DUMMY_CREDENTIALS, **self._env}
        self._sqs = boto3.session.Session().client(
            "sqs",
            endpoint_url=endpoint,
            region_name=self.region,
            aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
        )
        self._queues = create_queues(self._sqs, self.template, suffix=secrets.token_hex(4))
        self._apply_environment(self._environment(endpoint))

        template = self.template
        routes = RouteTable(
            (route, function.logical_id)
            for function in template.functions.values()
            for route in function.routes
        )
        api_name = template.api.logical_id if template.api else "none"
        api_id = hashlib.sha256(f"{template.path}:{api_name}".encode()).hexdigest()[:10]
        gateway = Gateway(template.api, routes, self._invoker.invoke, ApiInfo(api_id, self.region))
        self._http = LocalHttpServer(gateway, port=self._port)
        self._http.start()
        self._url = self._http.url

        for function in template.functions.values():
            for source in function.sqs_sources:
                if not source.enabled:
                    continue
                poller = QueuePoller(
                    self._sqs,
                    function=function,
                    source=source,
                    queue=self._queues[source.queue],
                    invoke=self._invoker.invoke,
                    region=self.region,
                )
                self._pollers.append(poller)
                poller.start()
        if self._timed_schedules:
            self._scheduler.start(at_start=self._start_up)
        for route, function_id in sorted(
            ((r, f.logical_id) for f in template.functions.values() for r in f.routes),
            key=lambda item: item[0].path,
        ):
            logger.info("route %s -> %s", route.route_key, function_id)
        logger.info("local runtime serving %s on %s", template.path.name, self._url)

    def _start_sqs(self) -> str:
        return self._local_sqs.enter_context(serve_sqs()).url

    def _environment(self, endpoint: str) -> dict[str, str]:
        queues = self._queues
        resolver = dataclasses.replace(
            self.template.resolver,
            refs={q.logical_id: q.url for q in queues.values()},
            attributes={
                key: value
                for q in queues.values()
                for key, value in (
                    ((q.logical_id, "Arn"), q.arn),
                    ((q.logical_id, "QueueUrl"), q.url),
                    ((q.logical_id, "QueueName"), q.name),
                )
            },
        )
        merged: dict[str, str] = {}
        owners: dict[str, str] = {}
        for function in self.template.functions.values():
            values, dropped = environment_of(function, resolver)
            if dropped:
                logger.info(
                    "%s: not set locally (known only in AWS): %s",
                    function.logical_id,
                    ", ".join(sorted(dropped)),
                )
            for name, value in values.items():
                if name in merged and merged[name] != value:
                    logger.warning(
                        "%s sets %s differently from %s; functions share one process here, "
                        "so %s's value is used",
                        function.logical_id,
                        name,
                        owners[name],
                        owners[name],
                    )
                    continue
                merged[name] = value
                owners[name] = function.logical_id
        shell = {
            name: os.environ[name]
            for name in self._parameter_variables()
            if name in merged and os.environ.get(name)
        }
        local = {
            "AWS_REGION": self.region,
            "AWS_DEFAULT_REGION": self.region,
            **_DUMMY_CREDENTIALS,
            **_NO_TRACING,
        }
        return {**merged, **shell, **local, **self._env, "AWS_ENDPOINT_URL_SQS": endpoint}

    def _parameter_variables(self) -> set[str]:
        """Variables the template sets straight from a parameter (``!Ref SomeParameter``): the
        ones a deployment configures, so the ones a developer may set in the shell. Resource
        references (queue URLs) are the runtime's own and never come from the shell."""
        parameters = self.template.resolver.parameters
        return {
            name
            for function in self.template.functions.values()
            for name, raw in function.environment.items()
            if isinstance(raw, dict) and raw.get("Ref") in parameters
        }

    def _apply_environment(self, env: dict[str, str]) -> None:
        self._previous_env = {name: os.environ.get(name) for name in env}
        self._applied_env = env
        os.environ.update(env)
        _forget_cached_configuration()

    def _restore_environment(self) -> None:
        for name, previous in self._previous_env.items():
            if os.environ.get(name) != self._applied_env[name]:
                continue  # changed by someone else since: theirs now
            if previous is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = previous
        self._previous_env = {}
        self._applied_env = {}
        _forget_cached_configuration()


def _forget_cached_configuration() -> None:
    """Settings and the pool are read once per process; the environment just changed."""
    get_settings.cache_clear()
    close_pool()


def serve(
    template_path: Path,
    *,
    port: int = 3000,
    env: Mapping[str, str],
    on_ready: Callable[[str], object] | None = None,
) -> None:
    """Run the local runtime until SIGINT or SIGTERM, then stop it cleanly. ``on_ready`` gets
    the API's URL once it listens (``context-ledger dev`` records it in the home)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with LocalRuntime(template_path, port=port, env=env, start_up=True) as runtime:
            if on_ready is not None:
                on_ready(runtime.url)
            while not stopping.wait(0.5):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
