"""The search-step cache: 60 seconds per organisation, authorised space set and search inputs.

Only the search step is cached (candidate chunk ids and their scores); authorisation, DLP and the
budget run on every request. The key names every searched source, so a source added to or deleted
from the searched spaces makes another key; each entry remembers the state (index version, last
change) of every searched source, those without hits too, and a hit is discarded when any of them
was re-published, re-indexed or had a memory written since. The cache lives in the process: a warm
Lambda container reuses it, a cold one starts empty.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

TTL_SECONDS = 60.0
MAX_ENTRIES = 1024


@dataclass(frozen=True)
class CachedSearch:
    candidates: tuple[Any, ...]
    #: the state of every searched source when they were searched (retrieval/service.py)
    source_states: dict[uuid.UUID, Hashable]


class SearchCache:
    """A small LRU with a time-to-live; safe to share between threads."""

    def __init__(
        self,
        ttl: float = TTL_SECONDS,
        max_entries: int = MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, CachedSearch]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> CachedSearch | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            stored_at, value = found
            if self._clock() - stored_at > self._ttl:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: CachedSearch) -> None:
        with self._lock:
            self._entries[key] = (self._clock(), value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
