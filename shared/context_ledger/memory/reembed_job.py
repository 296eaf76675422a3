"""The background re-embedding job: what ``MemoryReembedFunction`` runs (memory/reembed.py).

Three things start it, all through :func:`handle`:

- **A deploy that changes the model.** The ``MemoryReembedAfterDeploy`` custom resource's
  properties are the embeddings settings, so CloudFormation sends it ``Create`` with the stack and
  ``Update`` in every deploy that changes the endpoint, model or dimension: the job starts in the
  deploy that makes the change. It answers ``SUCCESS`` at once (re-embedding never fails or holds
  up a deploy), then works for the rest of its invocation. ``Delete`` is answered and does nothing.
- **The sweep schedule** (``Sweep``, every 10 minutes while ``MemoryReembedSweep`` is enabled):
  it finishes what a run left (a store larger than one invocation's 15 minutes, a run that died)
  and memories written during the deploy by a function still on the old settings. When nothing is
  stale a run is one index read.
- **The local runtime's start**: ``context-ledger dev`` fires ``Sweep`` once when it starts (the
  function's ``LocalFireAtStart``), standing in for the custom resource, which it does not run.

Every run is the same resumable, idempotent loop (``reembed.reembed``); it starts no batch after
the invocation's remaining time falls below :data:`DEADLINE_MARGIN_SECONDS`.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from context_ledger.db.custom_resource import Responder
from context_ledger.log import logger
from context_ledger.memory.embedding import memory_embedder
from context_ledger.memory.reembed import Progress, reembed
from context_ledger.settings import get_settings

PHYSICAL_RESOURCE_ID = "context-ledger-memory-reembed"
#: One batch (one request to the endpoint, its 30 s timeout and retries) fits in this margin.
DEADLINE_MARGIN_SECONDS = 60.0


class LambdaContextLike(Protocol):
    log_group_name: str
    log_stream_name: str

    def get_remaining_time_in_millis(self) -> int: ...


def handle(event: Any, context: LambdaContextLike) -> dict[str, Any]:
    """Run the job for a custom resource request, a scheduled event or any other invocation."""
    if isinstance(event, dict) and "ResponseURL" in event:
        request_type = event.get("RequestType")
        # Answered before any work, so a PUT that fails raises before anything is done and
        # Lambda's retry of the asynchronous invocation starts clean.
        Responder(event, context, physical_id=PHYSICAL_RESOURCE_ID).send(
            "SUCCESS", "memories are re-embedded in the background by this function"
        )
        if request_type == "Delete":
            return {"reembedded": 0, "remaining": 0, "withheld": 0}
    deadline = (
        time.monotonic() + context.get_remaining_time_in_millis() / 1000 - DEADLINE_MARGIN_SECONDS
    )
    settings = get_settings()
    done = reembed(embedder=memory_embedder(settings), settings=settings, deadline=deadline)
    return _summary(done)


def _summary(done: Progress) -> dict[str, Any]:
    summary = {
        "reembedded": done.reembedded,
        "remaining": done.remaining,
        "withheld": done.withheld,
        "seconds": round(done.seconds, 1),
    }
    if done.remaining:
        logger.info("re-embedding continues in the next run", extra=summary)
    return summary
