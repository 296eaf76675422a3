"""Run in a process of its own by test_tracing.py: the production template in the local runtime,
each given function invoked with its event, as Lambda would with X-Ray on.

    python traced_functions.py <job.json> <answers.json>

The job holds the runtime's ``env`` and the ``invocations`` (function, event, trace header).
The process must look like Lambda before anything imports the X-Ray SDK: the caller sets
``LAMBDA_TASK_ROOT`` and ``AWS_XRAY_DAEMON_ADDRESS`` in its environment. Before each invocation
``_X_AMZN_TRACE_ID`` is set to the invocation's header, as the Lambda runtime does, so every
subsegment names the invocation it belongs to. Answers (status code and body, or the exception's
type) go to a file: the functions log to stdout.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from context_ledger.local.runtime import LocalRuntime

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def answer_of(result: Any) -> dict[str, Any]:
    if isinstance(result, dict) and "statusCode" in result:
        return {"status": result["statusCode"], "body": result.get("body")}
    return {"type": type(result).__name__}


def main(job_path: str, answers_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    answers = []
    with LocalRuntime(TEMPLATE, port=0, env=job["env"], timed_schedules=False) as runtime:
        for invocation in job["invocations"]:
            os.environ["_X_AMZN_TRACE_ID"] = invocation["trace_header"]
            try:
                answer = answer_of(runtime.invoke(invocation["function"], invocation["event"]))
            except Exception as exc:  # the test asks for the subsegment, whatever the outcome
                answer = {"raised": type(exc).__name__}
            answers.append({"function": invocation["function"], "answer": answer})
    Path(answers_path).write_text(json.dumps(answers))


if __name__ == "__main__":
    main(*sys.argv[1:])
