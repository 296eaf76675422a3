"""Level weights against a real PostgreSQL: overrides per organisation over the operator's
defaults, replaced as a whole, read by retrieval in one query."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.db import connection
from context_ledger.errors import ForbiddenError, SpaceNotFoundError, ValidationFailedError
from context_ledger.settings import DEFAULT_LEVEL_WEIGHTS, load_settings
from context_ledger.spaces import service, weights
from context_ledger.spaces.permissions import Permission

SETTINGS = load_settings()


def person(org: service.Organisation, user: str, *scopes: str) -> Principal:
    return Principal(org_id=org.id, user_id=user, client_id="test", scopes=frozenset(scopes))


@pytest.fixture
def org(db) -> service.Organisation:
    with connection() as conn:
        return service.create_organisation(conn, name="Acme")


@pytest.fixture
def other_org(db) -> service.Organisation:
    with connection() as conn:
        return service.create_organisation(conn, name="Globex")


def replace(principal: Principal, overrides: dict, settings=SETTINGS) -> weights.LevelWeights:
    with connection() as conn:
        return weights.replace_overrides(conn, principal, overrides=overrides, settings=settings)


def effective(org: service.Organisation, settings=SETTINGS) -> dict[str, float]:
    with connection() as conn:
        return weights.effective_weights(conn, org.id, settings)


def test_without_overrides_the_effective_weights_are_the_spec_defaults(org) -> None:
    assert effective(org) == DEFAULT_LEVEL_WEIGHTS


def test_operator_defaults_from_the_environment_replace_the_spec_defaults(org) -> None:
    settings = load_settings(KEYSTONE_CONTEXT_LEVEL_WEIGHTS="project=1.5,personal=0.5")

    assert effective(org, settings) == {
        **DEFAULT_LEVEL_WEIGHTS,
        "project": 1.5,
        "personal": 0.5,
    }


def test_organisation_overrides_win_over_operator_defaults(org) -> None:
    settings = load_settings(KEYSTONE_CONTEXT_LEVEL_WEIGHTS="project=1.5,team=0.7")
    replace(person(org, "root", SCOPE_CONTEXT_ADMIN), {"project": 2})

    assert effective(org, settings) == {**DEFAULT_LEVEL_WEIGHTS, "project": 2.0, "team": 0.7}


def test_overrides_belong_to_one_organisation(org, other_org) -> None:
    replace(person(org, "root", SCOPE_CONTEXT_ADMIN), {"team": 0.5})

    assert effective(org)["team"] == 0.5
    assert effective(other_org) == DEFAULT_LEVEL_WEIGHTS


def test_a_replacement_keeps_only_the_levels_it_names(org) -> None:
    admin = person(org, "root", SCOPE_CONTEXT_ADMIN)
    replace(admin, {"project": 1.3, "team": 0.9})

    found = replace(admin, {"department": 1.0001})

    assert found.overrides == {"department": 1.0001}
    assert found.effective == {**DEFAULT_LEVEL_WEIGHTS, "department": 1.0001}


def test_an_empty_replacement_resets_to_the_defaults(org) -> None:
    admin = person(org, "root", SCOPE_CONTEXT_ADMIN)
    replace(admin, {"project": 1.3})

    assert replace(admin, {}).overrides == {}
    assert effective(org) == DEFAULT_LEVEL_WEIGHTS


def test_the_stored_weight_is_the_decimal_that_was_sent(org, database_url) -> None:
    replace(person(org, "root", SCOPE_CONTEXT_ADMIN), {"project": 1.2345, "team": 10})

    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT level, weight::text, updated_by FROM level_weight_overrides"
            " WHERE org_id = %s ORDER BY level",
            (org.id,),
        ).fetchall()
    assert rows == [("project", "1.2345", "user:root"), ("team", "10.0000", "user:root")]


def test_an_invalid_replacement_changes_nothing(org) -> None:
    admin = person(org, "root", SCOPE_CONTEXT_ADMIN)
    replace(admin, {"project": 1.3})

    with pytest.raises(ValidationFailedError):
        replace(admin, {"team": 1.0, "galaxy": 1.0})

    assert effective(org)["project"] == 1.3
    assert effective(org)["team"] == DEFAULT_LEVEL_WEIGHTS["team"]


def test_the_database_refuses_weights_outside_the_rule(org, database_url) -> None:
    insert = (
        "INSERT INTO level_weight_overrides (org_id, level, weight, updated_by)"
        " VALUES (%s, %s, %s, 'user:root')"
    )
    for level, weight in [("project", 0), ("project", 10.5), ("galaxy", 1)]:
        with psycopg.connect(database_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
            conn.execute(insert, (org.id, level, weight))


def test_a_searcher_on_the_organisation_space_may_not_read_or_change_weights(org) -> None:
    admin = person(org, "root", SCOPE_CONTEXT_ADMIN)
    with connection() as conn:
        service.set_grants(
            conn,
            admin,
            space_id=org.space_id,
            subject="user:reader",
            permissions=[Permission.SEARCH],
        )
    reader = person(org, "reader")

    with connection() as conn, pytest.raises(ForbiddenError):
        weights.get_weights(conn, reader, settings=SETTINGS)
    with pytest.raises(ForbiddenError):
        replace(reader, {"project": 1.3})


def test_an_admin_grant_on_the_organisation_space_is_enough(org) -> None:
    admin = person(org, "root", SCOPE_CONTEXT_ADMIN)
    with connection() as conn:
        service.set_grants(
            conn,
            admin,
            space_id=org.space_id,
            subject="user:carol",
            permissions=[Permission.ADMIN],
        )

    assert replace(person(org, "carol"), {"project": 1.3}).overrides == {"project": 1.3}


def test_a_caller_without_a_grant_is_told_the_space_does_not_exist(org) -> None:
    with connection() as conn, pytest.raises(SpaceNotFoundError):
        weights.get_weights(conn, person(org, "stranger"), settings=SETTINGS)


def test_permission_is_checked_before_the_body(org) -> None:
    with pytest.raises(SpaceNotFoundError):
        replace(person(org, "stranger"), {"galaxy": "x"})


def test_concurrent_replacements_leave_exactly_one_of_them(org) -> None:
    admin = person(org, "root", SCOPE_CONTEXT_ADMIN)
    levels = ["team", "group", "department", "personal"] * 2
    candidates = [{"project": 1 + i / 100, level: 0.5} for i, level in enumerate(levels)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda overrides: replace(admin, overrides), candidates))

    with connection() as conn:
        assert weights.load_overrides(conn, org_id=org.id) in candidates
