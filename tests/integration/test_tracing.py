"""X-Ray tracing of the functions (context_ledger/tracing.py), seen from a stand-in X-Ray daemon.

Each test runs the production template's functions in a process that looks like Lambda with
tracing on (``LAMBDA_TASK_ROOT``, a trace header per invocation, ``AWS_XRAY_DAEMON_ADDRESS``
pointing here): tests/integration/traced_functions.py. The stand-in daemon is a UDP socket on
loopback reading what the X-Ray SDK sends a real daemon: a JSON header line, then one segment
document per datagram. With the local runtime's own environment nothing arrives; with
``POWERTOOLS_TRACE_DISABLED=false`` every function's handler is a subsegment, the retrieve
steps are subsegments inside it, and no response is recorded.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from api_support import runtime_env
from search_support import admin_of, publish_source

from context_ledger.db import connection
from context_ledger.local.template import read_template
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.service import Organisation, create_organisation

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
PROBE = Path(__file__).with_name("traced_functions.py")
GO_PACKAGE = ROOT / "tests" / "fixtures" / "code_graph" / "go"

#: One sample event (events/) per function of the template: a new function needs one here.
SAMPLES = {
    "AttributionWriterFunction": "attribution-writer-batch.json",
    "AttributionsFunction": "attributions-get.json",
    "AuthorizerFunction": "authorizer-request.json",
    "ChainVerifyFunction": "chain-verify-sweep.json",
    "ContextAdminFunction": "context-admin-capabilities.json",
    "EmbeddingsFunction": "embeddings-create.json",
    "McpFunction": "mcp-get.json",
    "MemoryFunction": "memory_list.json",
    "MemoryReembedFunction": "memory-reembed-sweep.json",
    "MigrateFunction": "migrate-bootstrap.json",
    "ModelGatewayFunction": "models-logs.json",
    "ObservabilityFunction": "observability-chain-verify.json",
    "RetrieveFunction": "retrieve.json",
    "SourcesFunction": "sources-list.json",
    "SpacesFunction": "spaces-list.json",
}
RETRIEVE_STEPS = {
    "## retrieve.chain",
    "## retrieve.search",
    "## retrieve.rank",
    "## retrieve.budget",
    "## retrieve.related",
    "## retrieve.attribution_event",
}


class StandInXRayDaemon:
    """Collects the segment documents sent to it over UDP (the daemon's wire format)."""

    def __init__(self) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.settimeout(0.2)
        self.address = "{}:{}".format(*self._socket.getsockname())
        self.documents: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                datagram = self._socket.recv(65536)
            except TimeoutError:
                continue
            header, _, body = datagram.partition(b"\n")
            assert json.loads(header) == {"format": "json", "version": 1}
            self.documents.append(json.loads(body))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._socket.close()

    def by_trace(self) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for document in self.documents:
            found[document["trace_id"]].append(document)
        return found


@pytest.fixture
def daemon() -> Iterator[StandInXRayDaemon]:
    running = StandInXRayDaemon()
    yield running
    running.close()


@pytest.fixture
def org(db: str) -> Organisation:
    """An organisation with the Go fixture package as a codebase source: a retrieval of it
    reaches every step, related code included."""
    with connection() as conn:
        org = create_organisation(conn, name="Traced")
        documents = [
            Document(str(p.relative_to(GO_PACKAGE)), p.read_text())
            for p in sorted(GO_PACKAGE.rglob("*"))
            if p.is_file()
        ]
        publish_source(conn, org, documents, kind=SourceKind.CODEBASE, name="shop")
    return org


def sample(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text(encoding="utf-8"))


def retrieve_event(org: Organisation) -> dict[str, Any]:
    """The retrieve sample, asked by an administrator of ``org`` for its code."""
    event = copy.deepcopy(sample(SAMPLES["RetrieveFunction"]))
    event["requestContext"]["authorizer"]["lambda"] = admin_of(org).to_authorizer_context()
    event["body"] = json.dumps(
        {"query": "Authorise refund request", "sourceKinds": ["codebase"], "tokenBudget": 32000}
    )
    return event


def trace_header() -> tuple[str, str]:
    """A Lambda trace header (sampled) and its trace id."""
    trace_id = f"1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]}"
    return f"Root={trace_id};Parent={uuid.uuid4().hex[:16]};Sampled=1", trace_id


def run_functions(
    tmp_path: Path,
    daemon: StandInXRayDaemon,
    database_url: str,
    local_keys: Any,
    events: dict[str, dict[str, Any]],
    **env: str,
) -> tuple[dict[str, str], dict[str, Any], str]:
    """Invoke each function with its event in a Lambda-like process; the trace id of each
    function's invocation, its answers (traced_functions.py), and the process's stderr."""
    traces, invocations = {}, []
    for function, event in events.items():
        header, traces[function] = trace_header()
        invocations.append({"function": function, "event": event, "trace_header": header})
    job, answers = tmp_path / "job.json", tmp_path / "answers.json"
    variables = runtime_env(
        database_url,
        local_keys,
        CONTEXT_LEDGER_HOME=str(tmp_path / "home"),  # its checkpoints stay out of the session's
        KEYSTONE_EMBEDDINGS_PROVIDER="hashing",
        **env,
    )
    job.write_text(json.dumps({"env": variables, "invocations": invocations}))
    shell = {
        **os.environ,
        "LAMBDA_TASK_ROOT": str(ROOT),
        "AWS_XRAY_DAEMON_ADDRESS": daemon.address,
        "POWERTOOLS_SERVICE_NAME": "context-ledger",
    }
    result = subprocess.run(
        [sys.executable, str(PROBE), str(job), str(answers)],
        env=shell,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    answered = {a["function"]: a["answer"] for a in json.loads(answers.read_text())}
    return traces, answered, result.stderr


def test_every_function_of_the_template_has_a_sample_here() -> None:
    assert set(SAMPLES) == set(read_template(ROOT / "template.yaml").functions)


def test_with_tracing_on_every_handler_is_a_subsegment_and_retrieve_steps_nest_in_it(
    tmp_path, daemon, database_url, local_keys, org
) -> None:
    events = {function: sample(name) for function, name in SAMPLES.items()}
    events["RetrieveFunction"] = retrieve_event(org)

    traces, answers, _ = run_functions(
        tmp_path, daemon, database_url, local_keys, events, POWERTOOLS_TRACE_DISABLED="false"
    )

    assert answers["RetrieveFunction"]["status"] == 200
    documents = daemon.by_trace()
    for function, trace_id in traces.items():
        names = {d["name"] for d in documents.get(trace_id, [])}
        assert "## handler" in names, f"{function} sent no handler subsegment"
    retrieval = documents[traces["RetrieveFunction"]]
    (handler,) = [d for d in retrieval if d["name"] == "## handler"]
    steps = [d for d in retrieval if d["name"] in RETRIEVE_STEPS]
    assert {d["name"] for d in steps} == RETRIEVE_STEPS
    assert {d["parent_id"] for d in steps} == {handler["id"]}
    assert handler["annotations"]["Service"] == "context-ledger"
    # The attribution event's SendMessage, inside the handler: botocore is patched.
    calls = [
        d.get("aws", {}).get("operation") for d in retrieval if d["parent_id"] == handler["id"]
    ]
    assert "SendMessage" in calls


def test_no_response_is_recorded_in_a_trace(
    tmp_path, daemon, database_url, local_keys, org
) -> None:
    events = {"RetrieveFunction": retrieve_event(org), "SpacesFunction": sample("spaces-list.json")}

    _, answers, _ = run_functions(
        tmp_path, daemon, database_url, local_keys, events, POWERTOOLS_TRACE_DISABLED="false"
    )

    assert [answers[f]["status"] for f in events] == [200, 200]
    handlers = [d for d in daemon.documents if d["name"] == "## handler"]
    assert len(handlers) >= 2  # and the attribution writer's, once it has read the queue
    assert all("metadata" not in d for d in handlers)
    sent = json.dumps(daemon.documents)
    delivered = json.loads(answers["RetrieveFunction"]["body"])["chunks"]
    assert delivered
    assert not [c["id"] for c in delivered if c["content"] in sent]
    assert "Authorise refund request" not in sent  # nor the query


def test_the_local_runtime_runs_its_functions_untraced(
    tmp_path, daemon, database_url, local_keys, org
) -> None:
    events = {
        "RetrieveFunction": retrieve_event(org),
        "AuthorizerFunction": sample("authorizer-request.json"),
        "ChainVerifyFunction": sample("chain-verify-sweep.json"),
    }

    _, answers, stderr = run_functions(tmp_path, daemon, database_url, local_keys, events)

    assert answers["RetrieveFunction"]["status"] == 200
    assert daemon.documents == []
    assert "segment" not in stderr.lower()
