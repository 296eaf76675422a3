"""API Gateway's part of a request: route, authorize, build the event, map the answer.

Authorizer emulation follows HTTP APIs with a Lambda authorizer (payload 2.0, simple responses):
a missing or empty identity source is ``401`` without calling the authorizer; ``isAuthorized:
false`` is ``403``; an authorizer that fails or answers malformed is ``500``; otherwise its
``context`` reaches the route's function as ``requestContext.authorizer.lambda``. Results are not
cached (the API's ``AuthorizerResultTtlInSeconds`` is ignored), so every request is authorized.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from context_ledger.local.events import (
    ApiInfo,
    HttpRequest,
    HttpResponse,
    InvalidResponseError,
    Stamp,
    authorizer_event,
    gateway_error,
    http_event,
    http_response,
    query_parameters,
)
from context_ledger.local.routes import RouteMatch, RouteTable
from context_ledger.local.template import Authorizer, HttpApi

logger = logging.getLogger(__name__)

#: Invokes a function by logical id with an event and returns its result.
Invoke = Callable[[str, Any], Any]


class Gateway:
    """Turns HTTP requests into function invocations, as an HTTP API does."""

    def __init__(self, api: HttpApi | None, routes: RouteTable, invoke: Invoke, info: ApiInfo):
        self._api = api
        self._routes = routes
        self._invoke = invoke
        self.info = info

    def handle(self, request: HttpRequest, stamp: Stamp | None = None) -> HttpResponse:
        stamp = stamp or Stamp.new()
        response = self._handle(request, stamp)
        response.headers.append(("apigw-requestid", stamp.request_id))
        return response

    def error(self, status: int, message: str) -> HttpResponse:
        """An answer the gateway gives before routing (a body over the limit, a bad request)."""
        response = gateway_error(status, message)
        response.headers.append(("apigw-requestid", Stamp.new().request_id))
        return response

    def _handle(self, request: HttpRequest, stamp: Stamp) -> HttpResponse:
        match = self._routes.match(request.method, request.path)
        if match is None:
            return gateway_error(404, "Not Found")
        context: Mapping[str, Any] | None = None
        if match.route.authorizer is not None:
            assert self._api is not None  # a route names an authorizer only on an API
            outcome = self._authorize(
                self._api.authorizers[match.route.authorizer], request, match, stamp
            )
            if isinstance(outcome, HttpResponse):
                return outcome
            context = outcome
        event = http_event(
            request,
            route_key=match.route.route_key,
            path_parameters=match.path_parameters,
            api=self.info,
            stamp=stamp,
            authorizer_context=context,
        )
        try:
            return http_response(self._invoke(match.function, event))
        except InvalidResponseError as exc:
            logger.error("%s answered %s: %s", match.function, match.route.route_key, exc)
        except Exception:
            logger.exception("%s failed on %s", match.function, match.route.route_key)
        return gateway_error(500, "Internal Server Error")

    def _authorize(
        self, authorizer: Authorizer, request: HttpRequest, match: RouteMatch, stamp: Stamp
    ) -> HttpResponse | Mapping[str, Any]:
        identity = [request.header(name) for name in authorizer.identity_headers]
        query = query_parameters(request.query)
        identity += [query.get(name) for name in authorizer.identity_query]
        if not all(identity):
            return gateway_error(401, "Unauthorized")
        event = authorizer_event(
            request,
            route_key=match.route.route_key,
            path_parameters=match.path_parameters,
            identity_source=[value for value in identity if value],
            api=self.info,
            stamp=stamp,
        )
        try:
            result = self._invoke(authorizer.function, event)
        except Exception:
            logger.exception("authorizer %s failed", authorizer.function)
            return gateway_error(500, "Internal Server Error")
        if not isinstance(result, dict) or not isinstance(result.get("isAuthorized"), bool):
            logger.error(
                "authorizer %s answered without a boolean isAuthorized", authorizer.function
            )
            return gateway_error(500, "Internal Server Error")
        if not result["isAuthorized"]:
            return gateway_error(403, "Forbidden")
        context = result.get("context") or {}
        if not isinstance(context, dict):
            logger.error("authorizer %s answered a context that is not a map", authorizer.function)
            return gateway_error(500, "Internal Server Error")
        return context
