"""Schedules: fire ``Schedule``/``ScheduleV2`` events into their functions.

Which expressions fire on their own:

- ``rate(N minute|minutes|hour|hours|day|days)`` fires every period, the first time one period
  after start (as a new EventBridge rule does), not at start.
- ``cron(M H * * ? *)`` (a fixed minute and hour every day, ``?`` or ``*`` for the day fields)
  fires daily at that time, UTC.
- Any other ``cron(...)`` and one-time ``at(...)`` expressions are accepted but fire only on demand.

A schedule the function's ``Metadata`` lists in ``LocalFireAtStart`` also fires once when a
runtime that serves (``context-ledger dev``, not ``invoke`` or a test's) starts, in a thread of its
own (it may run long), for work a deploy starts in AWS: the memory re-embedding job's custom
resource, which the local runtime does not run.

Both kinds deliver an EventBridge "Scheduled Event" (or the schedule's ``Input``), naming the rule
(``Schedule``) or the schedule (``ScheduleV2``) in ``resources``. Every schedule can be fired on
demand with :meth:`Scheduler.fire`. A failed scheduled invocation is logged, not retried (AWS
would retry an asynchronous invocation).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import time as clock_time
from typing import Any

from context_ledger.local.events import ACCOUNT_ID, scheduled_event
from context_ledger.local.template import Function, ScheduleSource, TemplateError

logger = logging.getLogger(__name__)

_RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((.+)\)$")
_UNITS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
#: Longest sleep between clock checks, so a changed wall clock is noticed.
_MAX_SLEEP_SECONDS = 60.0


@dataclass(frozen=True)
class Cadence:
    """When a schedule fires on its own: every ``period``, daily at ``daily_at`` UTC, or never."""

    period: timedelta | None = None
    daily_at: clock_time | None = None

    def next_after(self, moment: datetime) -> datetime | None:
        if self.period is not None:
            return moment + self.period
        if self.daily_at is not None:
            at = moment.replace(
                hour=self.daily_at.hour, minute=self.daily_at.minute, second=0, microsecond=0
            )
            return at if at > moment else at + timedelta(days=1)
        return None


def parse_schedule(expression: str) -> Cadence:
    """The cadence of a schedule expression; raises TemplateError when it is malformed."""
    expression = expression.strip()
    rate = _RATE.match(expression)
    if rate:
        value = int(rate.group(1))
        if value < 1:
            raise TemplateError(f"schedule {expression!r}: the rate must be positive")
        return Cadence(period=value * _UNITS[rate.group(2).rstrip("s")])
    cron = _CRON.match(expression)
    if cron:
        fields = cron.group(1).split()
        if len(fields) != 6:
            raise TemplateError(f"schedule {expression!r}: cron needs 6 fields")
        minute, hour, day, month, weekday, year = fields
        daily = day in ("*", "?") and weekday in ("*", "?") and month == "*" and year == "*"
        fixed = minute.isdigit() and hour.isdigit() and int(minute) < 60 and int(hour) < 24
        if daily and fixed:
            return Cadence(daily_at=clock_time(int(hour), int(minute)))
        return Cadence()
    if expression.startswith("at("):
        return Cadence()
    raise TemplateError(f"schedule {expression!r}: expected rate(...), cron(...) or at(...)")


@dataclass
class _Entry:
    function: Function
    source: ScheduleSource
    cadence: Cadence
    next_at: datetime | None = None


class Scheduler:
    """Fires the schedules of ``functions`` in one background thread, and on demand."""

    def __init__(
        self,
        functions: Iterable[Function],
        invoke: Callable[[str, Any], Any],
        *,
        region: str,
        account_id: str = ACCOUNT_ID,
    ) -> None:
        self._invoke = invoke
        self._region = region
        self._account_id = account_id
        self._entries = [
            _Entry(function, source, parse_schedule(source.expression))
            for function in functions
            for source in function.schedules
        ]
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, *, at_start: bool = False) -> None:
        """Fire the schedules on their cadence from now on; ``at_start``: and those listed in
        ``LocalFireAtStart`` once, now."""
        now = datetime.now(UTC)
        for entry in self._entries:
            entry.next_at = entry.cadence.next_after(now) if entry.source.enabled else None
            if entry.source.enabled and entry.next_at is None:
                logger.info(
                    "%s %s (%s) fires only on demand locally",
                    entry.function.logical_id,
                    entry.source.event,
                    entry.source.expression,
                )
        if any(entry.next_at for entry in self._entries):
            self._thread = threading.Thread(target=self._run, name="local-schedules", daemon=True)
            self._thread.start()
        first = [entry for entry in self._entries if entry.source.at_start] if at_start else []
        if first:
            # Not joined by stop: a start-up run may outlast the runtime, and is cut off with it.
            threading.Thread(
                target=self._fire_at_start, args=(first,), name="local-start-up", daemon=True
            ).start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def fire(self, function: Function, schedule: str | None = None) -> Any:
        """Invoke ``function`` with its schedule's event now (the named one, or its only one)."""
        own = [e for e in self._entries if e.function.logical_id == function.logical_id]
        if not own:
            raise KeyError(f"{function.logical_id} has no schedule")
        chosen = [e for e in own if schedule in (None, e.source.event)]
        if len(chosen) != 1:
            names = ", ".join(e.source.event for e in own)
            raise KeyError(f"{function.logical_id}: name one of its schedules ({names})")
        return self._invoke(function.logical_id, self._event_for(chosen[0]))

    def _event_for(self, entry: _Entry) -> Any:
        if entry.source.input is not None:
            return entry.source.input
        name = f"{entry.function.logical_id}{entry.source.event}"
        prefix = f"{self._region}:{self._account_id}"
        if entry.source.scheduler:
            arn = f"arn:aws:scheduler:{prefix}:schedule/default/{name}"
        else:
            arn = f"arn:aws:events:{prefix}:rule/{name}"
        return scheduled_event(
            rule_arn=arn,
            region=self._region,
            account_id=self._account_id,
        )

    def _run(self) -> None:
        while not self._stopping.is_set():
            pending = [entry for entry in self._entries if entry.next_at is not None]
            if not pending:
                return
            now = datetime.now(UTC)
            soonest = min(entry.next_at for entry in pending if entry.next_at)
            wait = (soonest - now).total_seconds()
            if wait > 0:
                self._stopping.wait(min(wait, _MAX_SLEEP_SECONDS))
                continue
            for entry in pending:
                if entry.next_at is not None and entry.next_at <= now:
                    self._fire_due(entry, now)

    def _fire_at_start(self, entries: list[_Entry]) -> None:
        for entry in entries:
            if self._stopping.is_set():
                return
            try:
                self._invoke(entry.function.logical_id, self._event_for(entry))
            except Exception:
                if self._stopping.is_set():  # the runtime stopped under it
                    logger.info(
                        "%s %s stopped with the runtime",
                        entry.function.logical_id,
                        entry.source.event,
                    )
                    return
                logger.exception(
                    "%s %s at start failed", entry.function.logical_id, entry.source.event
                )

    def _fire_due(self, entry: _Entry, now: datetime) -> None:
        try:
            self._invoke(entry.function.logical_id, self._event_for(entry))
        except Exception:
            logger.exception(
                "scheduled %s %s failed", entry.function.logical_id, entry.source.event
            )
        next_at = entry.cadence.next_after(entry.next_at or now)
        while next_at is not None and next_at <= now:
            next_at = entry.cadence.next_after(next_at)  # skip fires missed while busy
        entry.next_at = next_at
