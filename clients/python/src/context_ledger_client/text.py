"""A retrieval as a table for people: path (symbol or heading), lines, level, score, tokens and
the relation of related code. ``context-ledger search`` and ``make demo`` print this one form."""

from __future__ import annotations

from context_ledger_client.models import RetrieveResult

_NAME = 60


def retrieval_table(result: RetrieveResult) -> str:
    """The chunks in rank order (related code last, as delivered), then the answer's ids."""
    lines = [
        f"{'path:lines (symbol or heading)':<{_NAME}} {'level':<12} {'score':>6} "
        f"{'tokens':>6}  related"
    ]
    for chunk in result.chunks:
        name = chunk.path + (f":{chunk.lines}" if chunk.lines else "")
        name += f" ({chunk.title})" if chunk.title else ""
        relation = chunk.related_relation or ""
        lines.append(
            f"{name[:_NAME]:<{_NAME}} {chunk.level:<12} {chunk.score:>6.3f} {chunk.tokens:>6}  "
            f"{relation}"
        )
    lines.append(
        f"tokensUsed {result.tokens_used}  searchMode {result.search_mode}  "
        f"requestId {result.request_id}  attributionId {result.attribution_id}"
    )
    lines.extend(f"warning: {warning}" for warning in result.warnings)
    return "\n".join(lines)
