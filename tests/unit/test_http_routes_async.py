"""Every route and dependency of every function's app is a coroutine function.

FastAPI runs a plain ``def`` route or dependency in Starlette's thread pool, and through Mangum
that pool is started again for every invocation: about 1 ms per request in thread hand-offs
(docs/decisions.md). Blocking inside ``async def`` costs nothing here, as a Lambda environment
serves one request at a time and the local runtime gives each request its own thread and event
loop (http/app.py).
"""

from __future__ import annotations

import inspect

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from context_ledger.http.api import FUNCTIONS, function_app, routers


def _calls(dependant: Dependant) -> list[tuple[str, object]]:
    """The dependant's own call and those of its dependencies, recursively, by name."""
    found = []
    if dependant.call is not None:
        found.append(
            (getattr(dependant.call, "__qualname__", repr(dependant.call)), dependant.call)
        )
    for sub in dependant.dependencies:
        found.extend(_calls(sub))
    return found


def _on_the_loop(call: object) -> bool:
    """A coroutine function, or an async generator (a dependency with ``yield``)."""
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_routes_and_dependencies_run_on_the_event_loop(function: str) -> None:
    routes = [r for router in routers(function) for r in router.routes if isinstance(r, APIRoute)]
    assert routes
    app_wide = [d.dependency for d in function_app(function).router.dependencies]
    calls = [(f"{r.path} {name}", call) for r in routes for name, call in _calls(r.dependant)]
    calls += [(f"app-wide {d}", d) for d in app_wide]
    blocking = sorted(where for where, call in calls if not _on_the_loop(call))
    assert blocking == []
