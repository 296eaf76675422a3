"""The SAM template, read into what the local runtime serves.

Only the parts the runtime emulates are modelled: Python functions with their HTTP API routes, SQS
event sources and schedules; the HTTP API's Lambda authorizers; SQS queues with their dead-letter
queues. A template that asks for something the runtime would emulate wrongly (a JWT authorizer,
payload format 1.0, a container image function) is refused with a :class:`TemplateError` naming
the resource; event types it does not emulate (S3, REST API) are skipped with a warning, and the
function can still be called with ``LocalRuntime.invoke``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from context_ledger.local.cfn import Resolver, UnresolvedError, load_yaml, ref_target

logger = logging.getLogger(__name__)

#: The logical id SAM gives the HTTP API it creates for events without ``ApiId``.
IMPLICIT_HTTP_API = "ServerlessHttpApi"
HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "ANY"})
DEFAULT_ROUTE = "$default"
_PATH_SEGMENT = re.compile(r"^(\{[A-Za-z0-9_.-]+\+?\}|[^{}]*)$")
#: SAM's defaults for a function that does not set them.
DEFAULT_TIMEOUT_SECONDS = 3
DEFAULT_MEMORY_MB = 128
_QUEUE_ATTRIBUTES = (
    "VisibilityTimeout",
    "DelaySeconds",
    "MessageRetentionPeriod",
    "MaximumMessageSize",
    "ReceiveMessageWaitTimeSeconds",
    "FifoQueue",
    "ContentBasedDeduplication",
)


class TemplateError(ValueError):
    """The template cannot be served locally; the message names the resource and the reason."""


@dataclass(frozen=True)
class HttpRoute:
    """One HTTP API route: ``GET /spaces/{spaceId}``, ``ANY /{proxy+}`` or ``$default``."""

    method: str
    path: str
    authorizer: str | None

    @property
    def route_key(self) -> str:
        return DEFAULT_ROUTE if self.path == DEFAULT_ROUTE else f"{self.method} {self.path}"


@dataclass(frozen=True)
class SqsSource:
    """An SQS event source mapping of a function."""

    event: str
    queue: str
    batch_size: int
    batching_window_seconds: int
    report_item_failures: bool
    enabled: bool


@dataclass(frozen=True)
class ScheduleSource:
    """A schedule (EventBridge rule or Scheduler schedule) that targets a function."""

    event: str
    expression: str
    enabled: bool
    input: Any | None
    #: ``ScheduleV2`` (EventBridge Scheduler) rather than ``Schedule`` (an EventBridge rule).
    scheduler: bool = False
    #: Fired once when the local runtime starts: listed in the function's ``Metadata``
    #: ``LocalFireAtStart``, for work a deploy starts in AWS (a custom resource the local runtime
    #: does not run).
    at_start: bool = False


@dataclass(frozen=True)
class Function:
    """A Python Lambda function and its event sources."""

    logical_id: str
    code_dir: Path
    module: str
    attribute: str
    runtime: str
    timeout: int
    memory_mb: int
    layer_dirs: tuple[Path, ...]
    environment: Mapping[str, Any]
    routes: tuple[HttpRoute, ...] = ()
    sqs_sources: tuple[SqsSource, ...] = ()
    schedules: tuple[ScheduleSource, ...] = ()

    @property
    def folder(self) -> str:
        """The CodeUri folder name (``spaces`` for ``functions/spaces/``)."""
        return self.code_dir.name

    @property
    def handler_file(self) -> Path:
        return self.code_dir.joinpath(*self.module.split(".")).with_suffix(".py")


@dataclass(frozen=True)
class Authorizer:
    """A Lambda authorizer (payload 2.0, simple responses) and its identity sources."""

    name: str
    function: str
    identity_headers: tuple[str, ...]
    identity_query: tuple[str, ...]


@dataclass(frozen=True)
class HttpApi:
    logical_id: str
    authorizers: Mapping[str, Authorizer]
    default_authorizer: str | None = None


@dataclass(frozen=True)
class Queue:
    """An SQS queue; ``attributes`` are CreateQueue attributes other than the redrive policy."""

    logical_id: str
    queue_name: str | None
    attributes: Mapping[str, str]
    dead_letter_queue: str | None = None
    max_receive_count: int | None = None

    @property
    def fifo(self) -> bool:
        return self.attributes.get("FifoQueue") == "true"


@dataclass(frozen=True)
class Template:
    path: Path
    functions: Mapping[str, Function]
    queues: Mapping[str, Queue]
    api: HttpApi | None
    resolver: Resolver

    def function(self, name: str) -> Function:
        """A function by logical id (``SpacesFunction``) or CodeUri folder (``spaces``)."""
        if name in self.functions:
            return self.functions[name]
        matches = [f for f in self.functions.values() if f.folder == name]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(sorted(self.functions))
        raise KeyError(f"no function {name!r} in {self.path.name} (functions: {known})")

    def queues_in_creation_order(self) -> list[Queue]:
        """Dead-letter queues before the queues that redrive to them."""
        ordered: list[Queue] = []
        placed: set[str] = set()

        def place(queue: Queue, chain: tuple[str, ...]) -> None:
            if queue.logical_id in chain:
                cycle = " -> ".join((*chain, queue.logical_id))
                raise TemplateError(f"dead-letter queues form a cycle: {cycle}")
            if queue.logical_id in placed:
                return
            if queue.dead_letter_queue:
                place(self.queues[queue.dead_letter_queue], (*chain, queue.logical_id))
            placed.add(queue.logical_id)
            ordered.append(queue)

        for queue in self.queues.values():
            place(queue, ())
        return ordered


def environment_of(function: Function, resolver: Resolver) -> tuple[dict[str, str], list[str]]:
    """The function's variables resolved locally, and the names of those dropped as unknowable."""
    resolved: dict[str, str] = {}
    dropped: list[str] = []
    for name, raw in function.environment.items():
        try:
            value = resolver.resolve(raw)
        except UnresolvedError:
            dropped.append(name)
            continue
        if isinstance(value, bool):
            resolved[name] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            resolved[name] = str(value)
        else:
            dropped.append(name)
    return resolved, dropped


def read_template(path: Path) -> Template:
    """Read a SAM template; raises TemplateError when it cannot be served locally."""
    path = path.resolve()
    try:
        document = load_yaml(path)
    except OSError as exc:
        raise TemplateError(f"cannot read template {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise TemplateError(f"{path.name} is not valid YAML: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("Resources"), dict):
        raise TemplateError(f"{path.name} has no Resources section")
    return _Reader(path, document).read()


def _merge(base: Any, override: Any) -> Any:
    """SAM's Globals rule: maps merge (the function wins), lists add up, scalars are replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = _merge(base[key], value) if key in base else value
        return merged
    if isinstance(base, list) and isinstance(override, list):
        return base + override
    return override


class _Reader:
    def __init__(self, path: Path, document: dict[str, Any]) -> None:
        self.path = path
        self.root = path.parent
        self.resources: dict[str, dict[str, Any]] = document["Resources"]
        self.globals: dict[str, Any] = document.get("Globals") or {}
        parameters = {
            name: spec["Default"]
            for name, spec in (document.get("Parameters") or {}).items()
            if isinstance(spec, dict) and "Default" in spec
        }
        self.resolver = Resolver(
            parameters=parameters,
            conditions=document.get("Conditions") or {},
            mappings=document.get("Mappings") or {},
        )

    def read(self) -> Template:
        present = {k: v for k, v in self.resources.items() if self._exists(k, v)}
        queues = {
            logical_id: self._queue(logical_id, resource.get("Properties") or {}, present)
            for logical_id, resource in present.items()
            if resource.get("Type") == "AWS::SQS::Queue"
        }
        function_props = {
            logical_id: _merge(self.globals.get("Function") or {}, resource.get("Properties") or {})
            for logical_id, resource in present.items()
            if resource.get("Type") == "AWS::Serverless::Function"
        }
        api = self._http_api(function_props, set(function_props))
        functions = {
            logical_id: self._function(logical_id, props, present, queues, api)
            for logical_id, props in function_props.items()
        }
        template = Template(self.path, functions, queues, api, self.resolver)
        self._check_unique_routes(template)
        template.queues_in_creation_order()  # refuses a dead-letter cycle now, not at start
        return template

    def _exists(self, logical_id: str, resource: Any) -> bool:
        if not isinstance(resource, dict):
            raise TemplateError(f"resource {logical_id} is not a mapping")
        condition = resource.get("Condition")
        if condition is None:
            return True
        try:
            return self.resolver.condition(condition)
        except UnresolvedError:
            return True

    def _value(self, where: str, value: Any) -> Any:
        try:
            return self.resolver.resolve(value)
        except UnresolvedError as exc:
            raise TemplateError(f"{where}: {exc}") from None

    def _int(self, where: str, value: Any) -> int:
        resolved = self._value(where, value)
        try:
            return int(resolved)
        except (TypeError, ValueError):
            raise TemplateError(f"{where}: expected a number, got {resolved!r}") from None

    # --- functions -------------------------------------------------------------------------------

    def _function(
        self,
        logical_id: str,
        props: dict[str, Any],
        resources: dict[str, dict[str, Any]],
        queues: dict[str, Queue],
        api: HttpApi | None,
    ) -> Function:
        where = f"function {logical_id}"
        if props.get("PackageType", "Zip") != "Zip" or "InlineCode" in props:
            raise TemplateError(f"{where}: only zip functions with a CodeUri folder are served")
        runtime = str(self._value(f"{where} Runtime", props.get("Runtime", "")))
        if not runtime.startswith("python"):
            raise TemplateError(f"{where}: runtime {runtime or '(none)'!r} is not Python")
        code_uri = props.get("CodeUri")
        if not isinstance(code_uri, str):
            raise TemplateError(f"{where}: CodeUri must be a local folder")
        code_dir = (self.root / code_uri).resolve()
        handler = props.get("Handler")
        if not isinstance(handler, str) or "." not in handler:
            raise TemplateError(f"{where}: Handler must look like module.attribute")
        module, attribute = handler.rsplit(".", 1)
        function = Function(
            logical_id=logical_id,
            code_dir=code_dir,
            module=module,
            attribute=attribute,
            runtime=runtime,
            timeout=self._int(f"{where} Timeout", props.get("Timeout", DEFAULT_TIMEOUT_SECONDS)),
            memory_mb=self._int(f"{where} MemorySize", props.get("MemorySize", DEFAULT_MEMORY_MB)),
            layer_dirs=self._layer_dirs(where, props.get("Layers") or [], resources),
            environment=(props.get("Environment") or {}).get("Variables") or {},
        )
        if not function.handler_file.is_file():
            raise TemplateError(f"{where}: handler file {function.handler_file} does not exist")
        routes: list[HttpRoute] = []
        sqs: list[SqsSource] = []
        schedules: list[ScheduleSource] = []
        for name, event in (props.get("Events") or {}).items():
            kind = event.get("Type")
            event_props = event.get("Properties") or {}
            event_where = f"{where} event {name}"
            if kind == "HttpApi":
                routes.append(self._route(event_where, event_props, api))
            elif kind == "SQS":
                sqs.append(self._sqs(event_where, name, event_props, queues))
            elif kind in ("Schedule", "ScheduleV2"):
                schedules.append(self._schedule(event_where, name, kind, event_props))
            else:
                logger.warning("%s: %s events are not emulated locally", event_where, kind)
        at_start = (resources[logical_id].get("Metadata") or {}).get("LocalFireAtStart") or []
        if not isinstance(at_start, list) or not set(at_start) <= {s.event for s in schedules}:
            raise TemplateError(f"{where}: LocalFireAtStart must list schedules of the function")
        schedules = [dataclasses.replace(s, at_start=s.event in at_start) for s in schedules]
        return dataclasses.replace(
            function, routes=tuple(routes), sqs_sources=tuple(sqs), schedules=tuple(schedules)
        )

    def _layer_dirs(
        self, where: str, layers: list[Any], resources: dict[str, dict[str, Any]]
    ) -> tuple[Path, ...]:
        dirs: list[Path] = []
        for layer in layers:
            target = ref_target(layer)
            if target is None:
                # A published layer (an ARN): its packages must be installed in the environment.
                continue
            resource = resources.get(target)
            if resource is None:
                raise TemplateError(f"{where}: layer {target} is not in the template")
            props = resource.get("Properties") or {}
            content = props.get("ContentUri", props.get("Content"))
            if not isinstance(content, str):
                raise TemplateError(f"{where}: layer {target} needs a local ContentUri folder")
            layer_dir = (self.root / content).resolve()
            # A layer built by hand keeps its packages in python/; SAM builds one from the folder.
            dirs.append(layer_dir / "python" if (layer_dir / "python").is_dir() else layer_dir)
        return tuple(dirs)

    def _route(self, where: str, props: dict[str, Any], api: HttpApi | None) -> HttpRoute:
        if str(props.get("PayloadFormatVersion", "2.0")) not in ("2.0", "2"):
            raise TemplateError(f"{where}: only payload format 2.0 is emulated")
        path = props.get("Path", DEFAULT_ROUTE)
        method = str(props.get("Method", "ANY")).upper()
        if method == "X-AMAZON-APIGATEWAY-ANY-METHOD":
            method = "ANY"
        if method not in HTTP_METHODS:
            raise TemplateError(f"{where}: unknown method {method}")
        if path != DEFAULT_ROUTE:
            _check_path(where, path)
        assert api is not None  # an HttpApi event always yields an API
        auth = props.get("Auth") or {}
        name = auth.get("Authorizer", api.default_authorizer)
        if name == "NONE":
            name = None
        if name is not None and name not in api.authorizers:
            raise TemplateError(f"{where}: authorizer {name} is not defined on {api.logical_id}")
        return HttpRoute(method, path, name)

    def _sqs(
        self, where: str, name: str, props: dict[str, Any], queues: dict[str, Queue]
    ) -> SqsSource:
        queue = ref_target(props.get("Queue"))
        if queue not in queues:
            raise TemplateError(f"{where}: Queue must be !GetAtt <queue>.Arn of a template queue")
        return SqsSource(
            event=name,
            queue=queue,
            batch_size=self._int(f"{where} BatchSize", props.get("BatchSize", 10)),
            batching_window_seconds=self._int(
                f"{where} MaximumBatchingWindowInSeconds",
                props.get("MaximumBatchingWindowInSeconds", 0),
            ),
            report_item_failures="ReportBatchItemFailures"
            in (props.get("FunctionResponseTypes") or []),
            enabled=bool(self._value(f"{where} Enabled", props.get("Enabled", True))),
        )

    def _schedule(self, where: str, name: str, kind: str, props: dict[str, Any]) -> ScheduleSource:
        key = "Schedule" if kind == "Schedule" else "ScheduleExpression"
        expression = self._value(f"{where} {key}", props.get(key))
        if not isinstance(expression, str):
            raise TemplateError(f"{where}: {key} is required")
        state = str(self._value(f"{where} State", props.get("State", "ENABLED"))).upper()
        enabled = bool(self._value(f"{where} Enabled", props.get("Enabled", True)))
        raw_input = props.get("Input")
        try:
            event_input = None if raw_input is None else json.loads(raw_input)
        except (TypeError, ValueError):
            raise TemplateError(f"{where}: Input must be a JSON string") from None
        return ScheduleSource(
            name, expression, enabled and state == "ENABLED", event_input, kind == "ScheduleV2"
        )

    # --- HTTP API --------------------------------------------------------------------------------

    def _http_api(
        self, function_props: dict[str, dict[str, Any]], names: set[str]
    ) -> HttpApi | None:
        api_ids = {
            ref_target((event.get("Properties") or {}).get("ApiId")) or IMPLICIT_HTTP_API
            for props in function_props.values()
            for event in (props.get("Events") or {}).values()
            if event.get("Type") == "HttpApi"
        }
        if not api_ids:
            return None
        if len(api_ids) > 1:
            raise TemplateError(f"one HTTP API is served locally; events use {sorted(api_ids)}")
        (api_id,) = api_ids
        props: dict[str, Any] = {}
        if api_id != IMPLICIT_HTTP_API:
            resource = self.resources.get(api_id) or {}
            if resource.get("Type") != "AWS::Serverless::HttpApi":
                raise TemplateError(f"ApiId {api_id} is not an AWS::Serverless::HttpApi")
            props = resource.get("Properties") or {}
        auth = _merge(self.globals.get("HttpApi") or {}, props).get("Auth") or {}
        where = f"HTTP API {api_id}"
        authorizers = {
            name: self._authorizer(f"{where} authorizer {name}", name, config or {}, names)
            for name, config in (auth.get("Authorizers") or {}).items()
        }
        default = auth.get("DefaultAuthorizer")
        if default is not None and default not in authorizers:
            raise TemplateError(f"{where}: DefaultAuthorizer {default} is not defined")
        return HttpApi(api_id, authorizers, default)

    def _authorizer(
        self, where: str, name: str, config: dict[str, Any], functions: set[str]
    ) -> Authorizer:
        if "JwtConfiguration" in config:
            raise TemplateError(f"{where}: JWT authorizers are not emulated, only Lambda ones")
        function = ref_target(config.get("FunctionArn"))
        if function not in functions:
            raise TemplateError(f"{where}: FunctionArn must be !GetAtt <function>.Arn")
        if str(config.get("AuthorizerPayloadFormatVersion")) not in ("2.0", "2"):
            raise TemplateError(f"{where}: only AuthorizerPayloadFormatVersion 2.0 is emulated")
        if config.get("EnableSimpleResponses") is not True:
            raise TemplateError(f"{where}: only simple responses (EnableSimpleResponses: true)")
        identity = config.get("Identity") or {}
        return Authorizer(
            name=name,
            function=function,
            identity_headers=tuple(str(h) for h in identity.get("Headers") or ()),
            identity_query=tuple(str(q) for q in identity.get("QueryStrings") or ()),
        )

    @staticmethod
    def _check_unique_routes(template: Template) -> None:
        seen: dict[str, str] = {}
        for function in template.functions.values():
            for route in function.routes:
                if route.route_key in seen:
                    raise TemplateError(
                        f"route {route.route_key} is declared by {seen[route.route_key]}"
                        f" and {function.logical_id}"
                    )
                seen[route.route_key] = function.logical_id

    # --- queues ----------------------------------------------------------------------------------

    def _queue(
        self, logical_id: str, props: dict[str, Any], resources: dict[str, dict[str, Any]]
    ) -> Queue:
        where = f"queue {logical_id}"
        try:
            name = self.resolver.resolve(props.get("QueueName"))
        except UnresolvedError:
            name = None  # e.g. !Sub ${AWS::StackName}-...: a generated name serves the same
        attributes = {}
        for key in _QUEUE_ATTRIBUTES:
            if key in props:
                value = self._value(f"{where} {key}", props[key])
                attributes[key] = str(value).lower() if isinstance(value, bool) else str(value)
        redrive = props.get("RedrivePolicy")
        if redrive is None:
            return Queue(logical_id, name, attributes)
        dlq = ref_target(redrive.get("deadLetterTargetArn"))
        target = resources.get(dlq or "") or {}
        if target.get("Type") != "AWS::SQS::Queue":
            raise TemplateError(f"{where}: deadLetterTargetArn must be !GetAtt <queue>.Arn")
        count = self._int(f"{where} maxReceiveCount", redrive.get("maxReceiveCount"))
        return Queue(logical_id, name, attributes, dlq, count)


def _check_path(where: str, path: Any) -> None:
    if not isinstance(path, str) or not path.startswith("/"):
        raise TemplateError(f"{where}: Path must start with /")
    segments = path.split("/")[1:]
    for index, segment in enumerate(segments):
        if not _PATH_SEGMENT.match(segment):
            raise TemplateError(f"{where}: bad path segment {segment!r}")
        if segment.endswith("+}") and index != len(segments) - 1:
            raise TemplateError(f"{where}: a greedy {segment} must be the last segment")
