"""A per-process "not now" switch: after a failure, callers skip a dependency for a while."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Cooldown:
    """After a failure, :meth:`active` says "skip it" until the given seconds have passed."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until = 0.0
        self._lock = threading.Lock()

    def active(self) -> bool:
        with self._lock:
            return self._clock() < self._until

    def start(self, seconds: float) -> None:
        with self._lock:
            self._until = self._clock() + seconds
