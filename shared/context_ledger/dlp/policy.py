"""Each organisation's DLP policy: an action per source classification, custom patterns, and
the classifications it withholds from everyone.

The action decides two things (docs/api.md, "DLP"):

- what may reach an embeddings endpoint (``dlp.gate``): ``allow`` and ``redact`` sources are
  embedded from redacted text; ``drop`` and ``block_source`` sources never are, and are searched
  through full-text only (spec: "searchable through full-text only");
- what a retrieval delivers (``dlp.delivery``): ``allow`` as stored, every other action
  redacted, to whoever may search the source's space.

``withheld`` is the separate, explicit setting for a classification no caller may receive at
all; a retrieval whose spaces hold such a source says so in its warnings.

An organisation without a stored policy uses :data:`DEFAULT_ACTIONS` and withholds nothing. A
replacement names every classification it changes; classifications it leaves out return to their
defaults, so a ``PUT`` with ``{}`` resets the policy, like the level weights.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from context_ledger.auth.principal import Principal
from context_ledger.db.pending import Pending, send
from context_ledger.dlp.classification import Classification
from context_ledger.dlp.redaction import CustomPattern, compile_custom_patterns
from context_ledger.errors import ForbiddenError, ValidationFailedError, shown_name


class DlpAction(StrEnum):
    ALLOW = "allow"
    REDACT = "redact"
    DROP = "drop"
    BLOCK_SOURCE = "block_source"


#: The spec's model: confidential, restricted and regulated content is never embedded (and
#: confidential and restricted never leave through an external endpoint); everything else is
#: redacted before it is embedded or delivered.
DEFAULT_ACTIONS: Mapping[Classification, DlpAction] = {
    Classification.PUBLIC: DlpAction.REDACT,
    Classification.INTERNAL: DlpAction.REDACT,
    Classification.CONFIDENTIAL: DlpAction.DROP,
    Classification.RESTRICTED: DlpAction.DROP,
    Classification.REGULATED: DlpAction.BLOCK_SOURCE,
}

#: Actions whose sources are never sent to any embeddings endpoint (full-text only).
NEVER_EMBEDDED = frozenset({DlpAction.DROP, DlpAction.BLOCK_SOURCE})

_MAX_PROBLEMS = 5  # as many as a validation message names (http/app.py)
_CLASSIFICATIONS = ", ".join(c.value for c in Classification)
_ACTIONS = ", ".join(a.value for a in DlpAction)

_SELECT = "SELECT actions, patterns, withheld FROM dlp_policies WHERE org_id = %(org_id)s"

_UPSERT = """
INSERT INTO dlp_policies (org_id, actions, patterns, withheld, updated_by)
VALUES (%(org_id)s, %(actions)s, %(patterns)s, %(withheld)s, %(updated_by)s)
ON CONFLICT (org_id) DO UPDATE
SET actions = EXCLUDED.actions, patterns = EXCLUDED.patterns, withheld = EXCLUDED.withheld,
    updated_by = EXCLUDED.updated_by, updated_at = now()
"""


@dataclass(frozen=True)
class DlpPolicy:
    """An organisation's effective policy: every classification has an action."""

    actions: Mapping[Classification, DlpAction] = field(default_factory=lambda: DEFAULT_ACTIONS)
    patterns: tuple[CustomPattern, ...] = ()
    #: classifications delivered to no caller at all (an explicit choice; none by default)
    withheld: frozenset[Classification] = frozenset()

    def action(self, classification: Classification | str) -> DlpAction:
        return self.actions[Classification(classification)]

    def withholds(self, classification: Classification | str) -> bool:
        return Classification(classification) in self.withheld

    @property
    def overrides(self) -> dict[str, str]:
        """The actions that differ from the defaults, as the API shows them."""
        return {c.value: a.value for c, a in self.actions.items() if DEFAULT_ACTIONS[c] is not a}


def parse_actions(raw: Mapping[str, object]) -> dict[Classification, DlpAction]:
    """Validate ``{classification: action}`` from a request; ValidationFailedError names the bad
    fields. Classifications left out keep their defaults."""
    parsed: dict[Classification, DlpAction] = dict(DEFAULT_ACTIONS)
    problems: list[str] = []
    for key, value in raw.items():
        field_name = f"actions.{shown_name(key)}"
        if key not in {c.value for c in Classification}:
            problems.append(f"{field_name}: unknown classification (one of: {_CLASSIFICATIONS})")
        elif not isinstance(value, str) or value not in {a.value for a in DlpAction}:
            problems.append(f"{field_name}: unknown action (one of: {_ACTIONS})")
        else:
            parsed[Classification(key)] = DlpAction(value)
    if problems:
        raise ValidationFailedError("; ".join(problems[:_MAX_PROBLEMS]))
    return parsed


def parse_withheld(raw: Sequence[object]) -> frozenset[Classification]:
    """Withheld classifications from a request; ValidationFailedError names the unknown ones."""
    known = {c.value for c in Classification}
    unknown = [f"withheld[{n}]" for n, value in enumerate(raw) if value not in known]
    if unknown:
        raise ValidationFailedError(
            f"{', '.join(unknown[:_MAX_PROBLEMS])}: unknown classification "
            f"(one of: {_CLASSIFICATIONS})"
        )
    return frozenset(Classification(value) for value in raw)


def parse_patterns(raw: Sequence[Mapping[str, Any]]) -> tuple[CustomPattern, ...]:
    """Custom patterns from a request, compiled once so that a bad one is refused here (422)."""
    patterns = tuple(CustomPattern(name=p["name"], pattern=p["pattern"]) for p in raw)
    try:
        compile_custom_patterns(patterns)
    except ValueError as exc:
        raise ValidationFailedError(f"patterns: {exc}") from None
    return patterns


def load_policy(conn: psycopg.Connection, *, org_id: uuid.UUID) -> DlpPolicy:
    """The organisation's effective policy (the defaults without a stored one)."""
    return pending_policy(conn, org_id=org_id).result()


def pending_policy(conn: psycopg.Connection, *, org_id: uuid.UUID) -> Pending[DlpPolicy]:
    """:func:`load_policy`'s statement, sent now and read later (db/pending.py)."""
    return send(conn, _SELECT, {"org_id": org_id}, lambda cursor: _policy(cursor.fetchone()))


def _policy(row: Mapping[str, Any] | None) -> DlpPolicy:
    if row is None:
        return DlpPolicy()
    actions = dict(DEFAULT_ACTIONS)
    actions.update({Classification(c): DlpAction(a) for c, a in row["actions"].items()})
    patterns = tuple(CustomPattern(name=p["name"], pattern=p["pattern"]) for p in row["patterns"])
    withheld = frozenset(Classification(c) for c in row["withheld"])
    return DlpPolicy(actions=actions, patterns=patterns, withheld=withheld)


def _authorize(principal: Principal, *, action: str) -> None:
    """The policy governs the whole organisation: only ``context:admin`` reads or changes it."""
    if not principal.is_context_admin:
        raise ForbiddenError(f"{action} needs the context:admin scope")


def get_policy(conn: psycopg.Connection, principal: Principal) -> DlpPolicy:
    _authorize(principal, action="reading the DLP policy")
    return load_policy(conn, org_id=principal.org_id)


def replace_policy(
    conn: psycopg.Connection,
    principal: Principal,
    *,
    actions: Mapping[str, object],
    patterns: Sequence[Mapping[str, Any]],
    withheld: Sequence[object] = (),
) -> DlpPolicy:
    """Make this the organisation's policy; what it leaves out returns to the defaults."""
    _authorize(principal, action="changing the DLP policy")
    policy = DlpPolicy(
        actions=parse_actions(actions),
        patterns=parse_patterns(patterns),
        withheld=parse_withheld(withheld),
    )
    conn.execute(
        _UPSERT,
        {
            "org_id": principal.org_id,
            "actions": Jsonb(policy.overrides),
            "patterns": Jsonb([{"name": p.name, "pattern": p.pattern} for p in policy.patterns]),
            "withheld": sorted(c.value for c in policy.withheld),
            "updated_by": f"user:{principal.user_id}",
        },
    )
    return policy
