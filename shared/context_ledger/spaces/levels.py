"""Space levels and how they nest."""

from __future__ import annotations

from enum import StrEnum


class Level(StrEnum):
    ORGANISATION = "organisation"
    BUSINESS_UNIT = "business_unit"
    DEPARTMENT = "department"
    GROUP = "group"
    TEAM = "team"
    PROJECT = "project"
    SUBPROJECT = "subproject"
    PERSONAL = "personal"


#: Nesting order: a space's level must rank strictly below its parent's, so a chain from any
#: space up to the organisation holds at most one space per level.
RANK: dict[Level, int] = {
    Level.ORGANISATION: 0,
    Level.BUSINESS_UNIT: 1,
    Level.DEPARTMENT: 2,
    Level.GROUP: 3,
    Level.TEAM: 4,
    Level.PROJECT: 5,
    Level.SUBPROJECT: 6,
}

#: Levels a client may create, in nesting order: the organisation space comes with the
#: organisation and personal spaces are created on first use. ``business_unit`` and
#: ``subproject`` keep their rank and weight (the spec defines them "but unused") and are not
#: creatable, so no chain holds one (docs/decisions.md).
CREATABLE_LEVELS = (Level.DEPARTMENT, Level.GROUP, Level.TEAM, Level.PROJECT)


def may_nest(child: Level, parent: Level) -> bool:
    return child in CREATABLE_LEVELS and parent in RANK and RANK[child] > RANK[parent]
