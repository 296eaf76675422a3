"""schemathesis against the served OpenAPI document, through the local runtime, as Acme's
context:admin in the security world (tests/security/conftest.py: both organisations' objects, the
model gateway in front of the stand-in provider).

Every operation of the document, positive and negative cases, with the checks
``not_a_server_error``, ``response_schema_conformance``, ``negative_data_rejection`` and
``ignored_auth``. ``make test`` runs a bounded number of cases per operation
(``CONTEXT_LEDGER_FUZZ_EXAMPLES``, default 8); ``make fuzz`` runs many more.

Path parameters the generator fills with random values mostly find nothing (404); so that the
cases also reach the handlers' real work, half of them (chosen by the generated value's hash)
name one of Acme's objects instead. DELETE gets the world's scratch objects.
"""

from __future__ import annotations

import os
import zlib

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.case import Case
from security_support import MEMORY_PROJECT, World

from context_ledger.http.openapi import openapi_document
from context_ledger.local.runtime import LocalRuntime

EXAMPLES = int(os.environ.get("CONTEXT_LEDGER_FUZZ_EXAMPLES", "8"))
#: ``make test`` sends the same cases every run; ``make fuzz`` explores new ones each time.
DERANDOMIZE = "CONTEXT_LEDGER_FUZZ_EXAMPLES" not in os.environ

CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
    checks.ignored_auth,
]

#: Path parameter name -> the world's id it may name (DELETE gets the second, a scratch object).
WORLD_PATH_IDS = {
    "space_id": ("team", "team"),
    "source_id": ("source", "scratch_source"),
    "request_id": ("request", "request"),
    "attribution_id": ("attribution", "attribution"),
    "memory_id": ("memory", "memory"),
}


#: The document the runtime serves (test_openapi_document.py checks they are the same); the base
#: URL is the session's runtime, given per call.
schema = schemathesis.openapi.from_dict(openapi_document())
#: Rejections all the same: a body over the function's limit (413; a negative case breaking
#: ``maxItems`` can be that large), a request line over the runtime's 64 KiB (414).
_rejection = schema.config.checks.negative_data_rejection
_rejection.expected_statuses = [*_rejection.expected_statuses, "413", "414"]


def _with_world_ids(case: Case, world: World) -> None:
    """Point half of the positive cases' path parameters at Acme's objects."""
    if case.meta is not None and case.meta.generation.mode.is_negative:
        return
    parameters = case.path_parameters or {}
    for name, value in list(parameters.items()):
        if zlib.crc32(repr(value).encode()) % 2:
            continue
        if name in WORLD_PATH_IDS:
            keep, scratch = WORLD_PATH_IDS[name]
            parameters[name] = world.ids[scratch if case.method == "DELETE" else keep]
        elif name == "project_id":
            parameters[name] = MEMORY_PROJECT


def _credential(case: Case, headers: dict[str, str]) -> dict[str, str]:
    """The caller's token, replacing any the generator made up; none (the case's own header, or
    no header) for a negative case whose mutation removed or broke the Authorization header:
    sending ours would undo the mutation."""
    meta = case.meta
    if meta is None or not meta.is_negative_at(ParameterLocation.HEADER):
        return headers
    if not any(name.lower() == "authorization" for name in case.headers or {}):
        return {}
    data = meta.phase.data
    named = {data.parameter} | {m.parameter for m in data.mutations}
    named |= {str(part) for m in data.mutations for part in (*m.path, *m.schema_pointer.split("/"))}
    return {} if "authorization" in {str(n).lower() for n in named} else headers


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=DERANDOMIZE,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_holds_to_its_document(case: Case, runtime: LocalRuntime, world: World) -> None:
    _with_world_ids(case, world)
    headers = _credential(case, world.callers["context_admin"])
    case.call_and_validate(base_url=runtime.url, headers=headers, checks=CHECKS)
