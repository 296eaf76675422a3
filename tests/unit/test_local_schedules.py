"""Schedule expressions: when the local runtime fires them on its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from datetime import time as clock_time

import pytest

from context_ledger.local.schedules import Cadence, parse_schedule
from context_ledger.local.template import TemplateError

START = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "period"),
    [
        ("rate(1 minute)", timedelta(minutes=1)),
        ("rate(5 minutes)", timedelta(minutes=5)),
        ("rate(2 hours)", timedelta(hours=2)),
        ("rate(1 day)", timedelta(days=1)),
    ],
)
def test_rate_fires_first_one_period_after_start(expression: str, period: timedelta) -> None:
    cadence = parse_schedule(expression)

    assert cadence == Cadence(period=period)
    assert cadence.next_after(START) == START + period


def test_daily_cron_fires_at_its_time_utc_today_or_tomorrow() -> None:
    cadence = parse_schedule("cron(15 3 * * ? *)")

    assert cadence == Cadence(daily_at=clock_time(3, 15))
    assert cadence.next_after(START) == datetime(2026, 3, 2, 3, 15, tzinfo=UTC)
    assert cadence.next_after(START.replace(hour=1)) == datetime(2026, 3, 1, 3, 15, tzinfo=UTC)


@pytest.mark.parametrize(
    "expression",
    ["cron(0 3 ? * MON-FRI *)", "cron(0/5 * * * ? *)", "at(2026-06-01T00:00:00)"],
)
def test_other_expressions_fire_only_on_demand(expression: str) -> None:
    assert parse_schedule(expression).next_after(START) is None


@pytest.mark.parametrize("expression", ["rate(0 days)", "rate(1 week)", "cron(0 3 * *)", "daily"])
def test_malformed_expressions_are_refused(expression: str) -> None:
    with pytest.raises(TemplateError):
        parse_schedule(expression)
