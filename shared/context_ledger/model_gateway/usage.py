"""Token usage as the provider reported it, read from the answer without changing it.

A plain answer carries ``usage`` in its JSON body. A streamed chat answer carries it in its last
data event when the caller asked for ``stream_options: {"include_usage": true}``; otherwise a
stream reports none, and the log says so (null) rather than guessing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenUsage:
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def usage_of(document: Any) -> TokenUsage | None:
    """The ``usage`` object of a decoded answer or stream event, if it has a usable one."""
    usage = document.get("usage") if isinstance(document, dict) else None
    if not isinstance(usage, dict):
        return None
    found = TokenUsage(
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        total_tokens=_count(usage.get("total_tokens")),
    )
    return None if found == TokenUsage(None, None, None) else found


def usage_of_body(body: bytes) -> TokenUsage | None:
    try:
        return usage_of(json.loads(body))
    except ValueError:
        return None


class StreamUsage:
    """Reads the ``data:`` lines of a server-sent event stream as it passes, keeping the last
    usage seen. Chunks may split lines anywhere; only complete lines are parsed."""

    def __init__(self) -> None:
        self._pending = b""
        self.usage: TokenUsage | None = None

    def feed(self, chunk: bytes) -> None:
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line.rstrip(b"\r"))

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        data = line[5:].strip()
        if not data.startswith(b"{"):
            return  # [DONE] and anything else that is not an event object
        try:
            found = usage_of(json.loads(data))
        except ValueError:
            return
        if found is not None:
            self.usage = found
