"""Related code: callers, callees and tests of the top code chunks (spec, "Related code").

For the top 3 ranked code chunks, up to 2 callees (``calls``), callers (``called_by``) and tests
(``tested_by``) each, at most 6 in total, taken round-robin over the anchors so the first anchor
cannot use them all. They come from the same (authorised, current) source graph, are not chunks
already delivered, and are appended after the ranked chunks with score 0.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

MAX_ANCHORS = 3
PER_RELATION = 2
MAX_RELATED = 6
RELATIONS = ("calls", "called_by", "tested_by")


@dataclass(frozen=True)
class RelatedPick:
    chunk_id: uuid.UUID
    related_to: uuid.UUID
    relation: str


def _by_anchor(
    edges: list[dict], anchors: list[uuid.UUID]
) -> dict[tuple[uuid.UUID, str], list[uuid.UUID]]:
    """For each (anchor, relation), its neighbours in a stable order.

    A test that calls an anchor directly has both edges, ``calls`` to it and ``tested_by`` from
    it: it is the anchor's test, so it is left out of the anchor's callers. (Otherwise the
    caller queue, served first, took it, and ``tested_by`` never named a directly calling test.)
    """
    anchor_set = set(anchors)
    found: dict[tuple[uuid.UUID, str], list[uuid.UUID]] = {}
    for edge in edges:
        source, target, relation = edge["from_chunk_id"], edge["to_chunk_id"], edge["relation"]
        if relation == "calls" and source in anchor_set:
            found.setdefault((source, "calls"), []).append(target)
        if relation == "calls" and target in anchor_set:
            found.setdefault((target, "called_by"), []).append(source)
        if relation == "tested_by" and source in anchor_set:
            found.setdefault((source, "tested_by"), []).append(target)
    for anchor in anchor_set:
        tests = set(found.get((anchor, "tested_by"), ()))
        if tests and (anchor, "called_by") in found:
            found[(anchor, "called_by")] = [
                c for c in found[(anchor, "called_by")] if c not in tests
            ]
    return found


def pick_related(
    anchors: list[uuid.UUID], edges: list[dict], exclude: set[uuid.UUID]
) -> list[RelatedPick]:
    """Choose the related chunks for ``anchors`` (ranked order) from their graph ``edges``.

    Each round takes at most one neighbour per (anchor, relation), so two rounds give at most two
    of each.
    """
    anchors = anchors[:MAX_ANCHORS]
    queues = _by_anchor(edges, anchors)
    taken: list[RelatedPick] = []
    seen = set(exclude)
    for _ in range(PER_RELATION):
        for anchor in anchors:
            for relation in RELATIONS:
                queue = [c for c in queues.get((anchor, relation), []) if c not in seen]
                if not queue:
                    continue
                queues[(anchor, relation)] = queue[1:]
                taken.append(RelatedPick(chunk_id=queue[0], related_to=anchor, relation=relation))
                seen.add(queue[0])
                if len(taken) == MAX_RELATED:
                    return taken
    return taken
