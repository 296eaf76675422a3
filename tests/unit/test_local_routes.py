"""HTTP API route selection: the most specific route wins, as API Gateway chooses."""

from __future__ import annotations

from context_ledger.local.routes import RouteTable
from context_ledger.local.template import HttpRoute


def table(*routes: tuple[str, str]) -> RouteTable:
    return RouteTable(
        (HttpRoute(method, path, None), f"{method} {path}") for method, path in routes
    )


def test_static_segment_beats_parameter_which_beats_greedy() -> None:
    routes = table(
        ("GET", "/spaces/{spaceId}"),
        ("GET", "/spaces/mine"),
        ("GET", "/spaces/{proxy+}"),
    )

    assert routes.match("GET", "/spaces/mine").function == "GET /spaces/mine"
    assert routes.match("GET", "/spaces/abc").function == "GET /spaces/{spaceId}"
    assert routes.match("GET", "/spaces/abc/grants").function == "GET /spaces/{proxy+}"


def test_earlier_static_segment_decides_before_later_ones() -> None:
    routes = table(("GET", "/a/{x}/c"), ("GET", "/a/b/{y}"))

    match = routes.match("GET", "/a/b/c")

    assert (match.function, match.path_parameters) == ("GET /a/b/{y}", {"y": "c"})


def test_route_with_the_method_beats_any_for_the_same_path() -> None:
    routes = table(("ANY", "/things"), ("POST", "/things"))

    assert routes.match("POST", "/things").function == "POST /things"
    assert routes.match("DELETE", "/things").function == "ANY /things"


def test_path_parameters_are_decoded_and_greedy_takes_the_rest() -> None:
    routes = table(("GET", "/files/{name}"), ("GET", "/blobs/{proxy+}"))

    assert routes.match("GET", "/files/a%20b").path_parameters == {"name": "a b"}
    assert routes.match("GET", "/blobs/x/y/z.txt").path_parameters == {"proxy": "x/y/z.txt"}


def test_greedy_needs_at_least_one_segment_and_parameters_are_not_empty() -> None:
    routes = table(("GET", "/blobs/{proxy+}"), ("GET", "/files/{name}"))

    assert routes.match("GET", "/blobs") is None
    assert routes.match("GET", "/files/") is None


def test_no_matching_route_is_none_unless_a_default_route_exists() -> None:
    assert table(("GET", "/a")).match("GET", "/b") is None
    assert table(("GET", "/a")).match("POST", "/a") is None

    with_default = RouteTable(
        [(HttpRoute("GET", "/a", None), "A"), (HttpRoute("ANY", "$default", None), "Fallback")]
    )
    match = with_default.match("PATCH", "/anything/else")
    assert (match.function, match.route.route_key) == ("Fallback", "$default")
