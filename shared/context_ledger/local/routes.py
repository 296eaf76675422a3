"""HTTP API route selection: the most specific route wins.

Path segments are compared left to right: a static segment beats ``{param}``, which beats a greedy
``{proxy+}``; for equally specific paths a route with the request's method beats ``ANY``. The
``$default`` route, if declared, takes what nothing else matches. Segments are matched after
percent-decoding, and path parameters are delivered decoded, as HTTP APIs do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from context_ledger.local.template import DEFAULT_ROUTE, HttpRoute

_STATIC, _PARAM, _GREEDY = 0, 1, 2


@dataclass(frozen=True)
class RouteMatch:
    route: HttpRoute
    function: str
    path_parameters: dict[str, str]


@dataclass(frozen=True)
class _Entry:
    route: HttpRoute
    function: str
    segments: tuple[tuple[int, str], ...]

    def match(self, parts: list[str]) -> dict[str, str] | None:
        parameters: dict[str, str] = {}
        for index, (kind, text) in enumerate(self.segments):
            if kind == _GREEDY:
                rest = "/".join(parts[index:])
                if not rest:
                    return None
                parameters[text] = rest
                return parameters
            if index >= len(parts):
                return None
            if kind == _STATIC and parts[index] != text:
                return None
            if kind == _PARAM:
                if not parts[index]:
                    return None
                parameters[text] = parts[index]
        return parameters if len(parts) == len(self.segments) else None

    def rank(self, method: str) -> tuple[tuple[int, ...], int]:
        """Smaller is more specific."""
        return tuple(kind for kind, _ in self.segments), 0 if self.route.method == method else 1


class RouteTable:
    """The routes of one HTTP API, each with the logical id of the function it invokes."""

    def __init__(self, routes: Iterable[tuple[HttpRoute, str]]) -> None:
        self._entries: list[_Entry] = []
        self._default: tuple[HttpRoute, str] | None = None
        for route, function in routes:
            if route.path == DEFAULT_ROUTE:
                self._default = (route, function)
            else:
                self._entries.append(_Entry(route, function, _segments(route.path)))

    def match(self, method: str, path: str) -> RouteMatch | None:
        """The route for ``method`` and the still percent-encoded ``path``, if any."""
        method = method.upper()
        parts = [unquote(part) for part in path.split("/")[1:]]
        candidates = []
        for entry in self._entries:
            if entry.route.method not in (method, "ANY"):
                continue
            parameters = entry.match(parts)
            if parameters is not None:
                candidates.append((entry.rank(method), entry, parameters))
        if candidates:
            _, entry, parameters = min(candidates, key=lambda candidate: candidate[0])
            return RouteMatch(entry.route, entry.function, parameters)
        if self._default is not None:
            return RouteMatch(self._default[0], self._default[1], {})
        return None


def _segments(path: str) -> tuple[tuple[int, str], ...]:
    segments = []
    for segment in path.split("/")[1:]:
        if segment.startswith("{") and segment.endswith("+}"):
            segments.append((_GREEDY, segment[1:-2]))
        elif segment.startswith("{") and segment.endswith("}"):
            segments.append((_PARAM, segment[1:-1]))
        else:
            segments.append((_STATIC, segment))
    return tuple(segments)
