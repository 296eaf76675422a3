"""Loading function handlers and calling them the way the Lambda runtime does.

Every function's handler file is ``app.py``, so each is imported by file path under its own module
name, once per runtime. Function folders are not put on ``sys.path`` (they would shadow one
another's ``app``); handlers import from the shared layer, which is added only if it is not
installed already. Calls run in the caller's thread (HTTP request threads, queue pollers, the
scheduler). No lock serialises calls to one function: our handlers (Mangum over FastAPI, Powertools
batch processing) keep no per-call state in globals, and one request waiting on another would hide
concurrency bugs that Lambda's parallel execution environments would expose anyway.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from context_ledger.local.events import ACCOUNT_ID
from context_ledger.local.template import Function

logger = logging.getLogger(__name__)

_runtime_numbers = itertools.count(1)


class FunctionLoadError(RuntimeError):
    """A handler could not be imported (Lambda's Runtime.ImportModuleError)."""


class LambdaContext:
    """The context object the Python Lambda runtime passes as the handler's second argument."""

    def __init__(self, function: Function, *, region: str, account_id: str = ACCOUNT_ID) -> None:
        self.function_name = function.logical_id
        self.function_version = "$LATEST"
        self.invoked_function_arn = (
            f"arn:aws:lambda:{region}:{account_id}:function:{function.logical_id}"
        )
        # The real runtime reads it from AWS_LAMBDA_FUNCTION_MEMORY_SIZE: a string.
        self.memory_limit_in_mb = str(function.memory_mb)
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function.logical_id}"
        self.log_stream_name = f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}"
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + function.timeout

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class Invoker:
    """Loads each function's handler on first use and invokes it with a fresh context."""

    def __init__(self, functions: dict[str, Function], *, region: str) -> None:
        self._functions = functions
        self._region = region
        self._prefix = f"_context_ledger_local_{next(_runtime_numbers)}"
        self._handlers: dict[str, Callable[[Any, Any], Any]] = {}
        self._modules: list[str] = []
        self._lock = threading.Lock()

    def invoke(self, function_id: str, event: Any) -> Any:
        """Call the function's handler; its exceptions propagate to the caller."""
        function = self._functions[function_id]
        handler = self.handler(function)
        context = LambdaContext(function, region=self._region)
        started = time.monotonic()
        try:
            return _with_event_loop(handler, event, context)
        finally:
            elapsed = time.monotonic() - started
            if elapsed > function.timeout:
                logger.warning(
                    "%s ran %.1f s, over its %d s timeout (not enforced locally)",
                    function.logical_id,
                    elapsed,
                    function.timeout,
                )

    def handler(self, function: Function) -> Callable[[Any, Any], Any]:
        """The function's handler object, imported on first use."""
        with self._lock:
            if function.logical_id not in self._handlers:
                self._handlers[function.logical_id] = self._load(function)
            return self._handlers[function.logical_id]

    def unload(self) -> None:
        """Forget the imported handler modules."""
        with self._lock:
            self._handlers.clear()
            for name in self._modules:
                sys.modules.pop(name, None)
            self._modules.clear()

    def _load(self, function: Function) -> Callable[[Any, Any], Any]:
        for layer_dir in function.layer_dirs:
            _add_layer_to_path(layer_dir)
        name = f"{self._prefix}_{function.logical_id}"
        path = function.handler_file
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise FunctionLoadError(f"{function.logical_id}: cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        self._modules.append(name)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise FunctionLoadError(f"{function.logical_id}: importing {path} failed") from exc
        handler = getattr(module, function.attribute, None)
        if not callable(handler):
            raise FunctionLoadError(f"{function.logical_id}: {path} has no {function.attribute}")
        logger.debug("loaded %s from %s", function.logical_id, path)
        return handler


def _add_layer_to_path(layer_dir: Path) -> None:
    """Put a layer folder on sys.path unless its packages are importable already.

    In development the shared layer is usually installed in the virtualenv (``pip install -e``);
    adding its folder again would only shadow that install.
    """
    if str(layer_dir) in sys.path or not layer_dir.is_dir():
        return
    names = [
        child.stem
        for child in layer_dir.iterdir()
        if child.stem.isidentifier()
        and ((child.is_dir() and (child / "__init__.py").exists()) or child.suffix == ".py")
    ]
    if any(importlib.util.find_spec(name) is None for name in names):
        sys.path.append(str(layer_dir))


def _with_event_loop(handler: Callable[[Any, Any], Any], event: Any, context: Any) -> Any:
    """Call the handler with an asyncio event loop set for this thread.

    Mangum runs each request on ``asyncio.get_event_loop()``, which only the main thread has by
    default; request, poller and scheduler threads get a loop for the duration of the call.
    """
    if threading.current_thread() is threading.main_thread() or _has_event_loop():
        return handler(event, context)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return handler(event, context)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def _has_event_loop() -> bool:
    try:
        asyncio.get_event_loop()
    except RuntimeError:
        return False
    return True
