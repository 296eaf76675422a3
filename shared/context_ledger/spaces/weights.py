"""Level weights: the operator's defaults with each organisation's overrides.

Ranking multiplies a chunk's score by the weight of its space's level (spec: "Level weights").
The operator sets the defaults (the spec's, changed by ``KEYSTONE_CONTEXT_LEVEL_WEIGHTS``; see
``Settings.effective_level_weights``); an organisation's administrators override any level through
``/api/v1/context/weights``, and a replacement sets exactly the overrides it names.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg

from context_ledger.auth.principal import Principal
from context_ledger.db.pending import Pending, send
from context_ledger.errors import SpaceNotFoundError, ValidationFailedError, shown_name
from context_ledger.settings import Settings
from context_ledger.spaces import store
from context_ledger.spaces.levels import Level
from context_ledger.spaces.permissions import Permission
from context_ledger.spaces.service import authorize_space

MAX_WEIGHT = Decimal(10)
#: Weights carry at most 4 decimals (the column is numeric(6,4)).
WEIGHT_STEP = Decimal("0.0001")
_MAX_PROBLEMS = 5  # as many as a validation message names (http/app.py)
_LEVEL_NAMES = sorted(level.value for level in Level)
#: Advisory lock class ("wgts") under which one organisation's replacements run one at a time;
#: organisations whose ids share a hashtext only wait for each other.
_LOCK_CLASS = 0x77677473

_OVERRIDES = """
SELECT level, weight FROM level_weight_overrides WHERE org_id = %(org_id)s ORDER BY level
"""

_LOCK_OVERRIDES = """
SELECT pg_advisory_xact_lock(%(lock_class)s::integer, hashtext(%(org_id)s::text))
"""

_DELETE_OVERRIDES = "DELETE FROM level_weight_overrides WHERE org_id = %(org_id)s"

_INSERT_OVERRIDES = """
INSERT INTO level_weight_overrides (org_id, level, weight, updated_by)
SELECT %(org_id)s, level, weight, %(updated_by)s
FROM unnest(%(levels)s::text[], %(weights)s::numeric[]) AS given (level, weight)
"""


@dataclass(frozen=True)
class LevelWeights:
    """An organisation's weights, as ``GET /api/v1/context/weights`` shows them."""

    defaults: dict[str, float]
    overrides: dict[str, float]

    @property
    def effective(self) -> dict[str, float]:
        return {**self.defaults, **self.overrides}


def parse_weight(value: object) -> Decimal:
    """A weight from a JSON number: in (0, 10] with at most 4 decimals; ValueError otherwise.

    A float counts by its ``repr``, the shortest decimal that reads back as the same float, i.e.
    the number as the client wrote it: ``1.2345`` passes, although the nearest binary double has
    many more digits. (Digits beyond a double's 17 significant ones are lost in JSON parsing.)
    """
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError("must be a number")
    weight = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not weight.is_finite() or not 0 < weight <= MAX_WEIGHT:
        raise ValueError("must be in (0, 10]")
    if weight != weight.quantize(WEIGHT_STEP):
        raise ValueError("must have at most 4 decimals")
    return weight


def parse_overrides(raw: Mapping[str, object]) -> dict[Level, Decimal]:
    """Validate overrides from a request; ValidationFailedError names the bad fields."""
    parsed: dict[Level, Decimal] = {}
    problems: list[str] = []
    for key, value in raw.items():
        field = f"overrides.{shown_name(key)}"
        if key not in _LEVEL_NAMES:
            problems.append(f"{field}: unknown level (one of: {', '.join(_LEVEL_NAMES)})")
            continue
        try:
            parsed[Level(key)] = parse_weight(value)
        except ValueError as exc:
            problems.append(f"{field}: {exc}")
    if problems:
        raise ValidationFailedError("; ".join(problems[:_MAX_PROBLEMS]))
    return parsed


def load_overrides(conn: psycopg.Connection, *, org_id: uuid.UUID) -> dict[str, float]:
    """The organisation's overrides, by level (one scan of the primary key's org_id prefix)."""
    return _overrides(conn.execute(_OVERRIDES, {"org_id": org_id}))


def _overrides(cursor: psycopg.Cursor[Any]) -> dict[str, float]:
    return {row["level"]: float(row["weight"]) for row in cursor.fetchall()}


def _weights(conn: psycopg.Connection, org_id: uuid.UUID, settings: Settings) -> LevelWeights:
    return LevelWeights(
        defaults=settings.effective_level_weights,
        overrides=load_overrides(conn, org_id=org_id),
    )


def effective_weights(
    conn: psycopg.Connection, org_id: uuid.UUID, settings: Settings
) -> dict[str, float]:
    """The weight of every level for ranking in ``org_id``: its overrides over the defaults."""
    return pending_weights(conn, org_id, settings).result()


def pending_weights(
    conn: psycopg.Connection, org_id: uuid.UUID, settings: Settings
) -> Pending[dict[str, float]]:
    """:func:`effective_weights`' statement, sent now and read later (db/pending.py)."""

    def effective(cursor: psycopg.Cursor[Any]) -> dict[str, float]:
        return LevelWeights(settings.effective_level_weights, _overrides(cursor)).effective

    return send(conn, _OVERRIDES, {"org_id": org_id}, effective)


def _authorize(conn: psycopg.Connection, principal: Principal, *, action: str) -> None:
    """Weights belong to the organisation: they need context:space:admin on its space."""
    root = store.organisation_space(conn, org_id=principal.org_id)
    if root is None:
        raise SpaceNotFoundError("organisation has no organisation space")
    authorize_space(conn, principal, root["id"], Permission.ADMIN, action=action)


def get_weights(
    conn: psycopg.Connection, principal: Principal, *, settings: Settings
) -> LevelWeights:
    _authorize(conn, principal, action="reading level weights")
    return _weights(conn, principal.org_id, settings)


def replace_overrides(
    conn: psycopg.Connection,
    principal: Principal,
    *,
    overrides: Mapping[str, object],
    settings: Settings,
) -> LevelWeights:
    """Make ``overrides`` the organisation's only overrides (empty: back to the defaults)."""
    _authorize(conn, principal, action="changing level weights")
    parsed = parse_overrides(overrides)
    org = {"org_id": principal.org_id}
    with conn.transaction():
        # Concurrent replacements would otherwise interleave their deletes and inserts.
        conn.execute(_LOCK_OVERRIDES, {**org, "lock_class": _LOCK_CLASS})
        conn.execute(_DELETE_OVERRIDES, org)
        conn.execute(
            _INSERT_OVERRIDES,
            {
                **org,
                "levels": [level.value for level in parsed],
                "weights": list(parsed.values()),
                "updated_by": f"user:{principal.user_id}",
            },
        )
    return _weights(conn, principal.org_id, settings)
