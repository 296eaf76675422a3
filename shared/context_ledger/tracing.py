"""The service's X-Ray tracing (Powertools' Tracer), shared by every function and the use cases.

Every function's handler is one subsegment (``## handler``, :func:`trace_handler`); the retrieve
use case marks its steps (:func:`step`). ``Tracing: Active`` in the template makes Lambda start
each invocation's segment and run the X-Ray daemon.

Where nothing would be traced (outside Lambda: the local runtime, tests, the CLI, benchmarks; or
``POWERTOOLS_TRACE_DISABLED=true``, which the local runtime sets) no Tracer is made and both are
no-ops: a disabled Tracer still imports the X-Ray SDK (0.3 to 0.8 s outside Lambda, for its
sampling clients), and its wrapper and subsegments still build dummy segments, ~50 to 100 µs a
call (docs/decisions.md, "Tracing").

Responses are never recorded: a handler's answer is retrieved content, after authorisation and
DLP, and a trace is readable by whoever may read X-Ray, not by whoever may read that content.

Only AWS SDK and HTTP calls are patched (a subsegment each: SQS, Secrets Manager, S3, the
embeddings endpoint, the model provider, the JWKS). Not psycopg: X-Ray's patch wraps every pooled
connection in a proxy our pool, pipelines and ``configure`` callback were never run against, and
adds a subsegment per statement; the retrieve steps time the database as the use case groups it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from context_ledger.settings import xray_tracing

Handler = TypeVar("Handler", bound=Callable[..., Any])

if xray_tracing():
    from aws_lambda_powertools import Tracer

    _tracer = Tracer(patch_modules=("botocore", "httplib", "httpx"))
    _capture = _tracer.capture_lambda_handler(capture_response=False)

    def trace_handler(handler: Handler) -> Handler:
        """The Lambda handler as a subsegment: the cold start annotated, an exception recorded,
        its answer not."""
        return _capture(handler)

    def step(name: str) -> AbstractContextManager[Any]:
        """A subsegment ``## name`` around a step of a use case."""
        return _tracer.provider.in_subsegment(f"## {name}")

else:

    def trace_handler(handler: Handler) -> Handler:
        """Not traced here: the handler itself."""
        return handler

    def step(name: str) -> AbstractContextManager[Any]:
        """Not traced here: nothing around the step."""
        return nullcontext()
