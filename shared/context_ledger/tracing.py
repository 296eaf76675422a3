"""The service's X-Ray tracer (Powertools), shared by every function and the use cases.

Every function's handler is one subsegment (``## handler``, :data:`trace_handler`); the retrieve
use case marks its steps (:func:`step`). ``Tracing: Active`` in the template makes Lambda start
each invocation's segment and run the X-Ray daemon; outside Lambda (the local runtime, tests,
the CLI) Powertools turns the tracer off by itself, and the local runtime says so once more with
``POWERTOOLS_TRACE_DISABLED=true`` (docs/decisions.md, "Tracing").

Responses are never recorded: a handler's answer is retrieved content, after authorisation and
DLP, and a trace is readable by whoever reads X-Ray, not by whoever may read that content.

Only AWS SDK and HTTP calls are patched (a subsegment each: SQS, Secrets Manager, S3, the
embeddings endpoint, the model provider, the JWKS). Not psycopg: X-Ray's patch wraps every pooled
connection in a proxy our pool, pipelines and ``configure`` callback were never run against, and
would add a subsegment per statement; the retrieve steps time the database as the use case
groups it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from aws_lambda_powertools import Tracer

tracer = Tracer(patch_modules=("botocore", "httplib", "httpx"))

#: ``@trace_handler`` on a Lambda handler: its subsegment, with the cold start annotated, an
#: exception recorded and its answer not.
trace_handler = tracer.capture_lambda_handler(capture_response=False)


def step(name: str) -> AbstractContextManager[Any]:
    """A subsegment ``## name`` around a step of a use case.

    With tracing off it is a ``nullcontext``: X-Ray's disabled path still builds a dummy segment
    and subsegment per call (~50 µs here, measured in docs/decisions.md), a retrieve has six steps.
    """
    if tracer.disabled:
        return nullcontext()
    return tracer.provider.in_subsegment(f"## {name}")
