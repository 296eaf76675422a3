"""Spaces, grants and permissions against a real PostgreSQL."""

from __future__ import annotations

import uuid

import pytest

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal, PrincipalKind
from context_ledger.db import connection
from context_ledger.errors import ForbiddenError, SpaceNotFoundError, ValidationFailedError
from context_ledger.spaces import service
from context_ledger.spaces.levels import Level
from context_ledger.spaces.permissions import Permission

SEARCH, ADMIN = Permission.SEARCH, Permission.ADMIN


def person(org: service.Organisation, user: str, *scopes: str, groups=()) -> Principal:
    return Principal(
        org_id=org.id,
        user_id=user,
        client_id="test",
        scopes=frozenset(scopes),
        groups=frozenset(groups),
    )


@pytest.fixture
def org(db) -> service.Organisation:
    with connection() as conn:
        return service.create_organisation(conn, name="Acme")


@pytest.fixture
def other_org(db) -> service.Organisation:
    with connection() as conn:
        return service.create_organisation(conn, name="Globex")


@pytest.fixture
def admin(org) -> Principal:
    return person(org, "root", SCOPE_CONTEXT_ADMIN)


def make(principal: Principal, name: str, level: Level, parent: uuid.UUID | None = None):
    with connection() as conn:
        return service.create_space(conn, principal, name=name, level=level, parent_id=parent)


def grant(principal: Principal, space_id: uuid.UUID, subject: str, *permissions: Permission):
    with connection() as conn:
        service.set_grants(
            conn, principal, space_id=space_id, subject=subject, permissions=list(permissions)
        )


def get(principal: Principal, space_id: uuid.UUID) -> service.Space:
    with connection() as conn:
        return service.get_space(conn, principal, space_id)


def listed(principal: Principal) -> dict[uuid.UUID, set[Permission]]:
    with connection() as conn:
        return {s.id: set(s.permissions) for s in service.list_spaces(conn, principal)}


def test_a_grant_on_a_space_applies_to_its_descendants(org, admin) -> None:
    dept = make(admin, "Engineering", Level.DEPARTMENT)
    team = make(admin, "Payments", Level.TEAM, dept.id)
    project = make(admin, "Billing", Level.PROJECT, team.id)
    grant(admin, dept.id, "user:alice", SEARCH)
    alice = person(org, "alice")

    assert get(alice, project.id).permissions == {SEARCH}
    assert {dept.id, team.id, project.id} <= set(listed(alice))


def test_a_grant_does_not_reach_ancestors_or_siblings(org, admin) -> None:
    dept = make(admin, "Engineering", Level.DEPARTMENT)
    team_a = make(admin, "Payments", Level.TEAM, dept.id)
    team_b = make(admin, "Search", Level.TEAM, dept.id)
    grant(admin, team_a.id, "user:alice", SEARCH)
    alice = person(org, "alice")

    for hidden in (dept.id, team_b.id, org.space_id):
        with pytest.raises(SpaceNotFoundError):
            get(alice, hidden)


def test_a_group_grant_applies_to_members_of_the_group(org, admin) -> None:
    team = make(admin, "Payments", Level.TEAM)
    grant(admin, team.id, "group:payments", ADMIN)

    assert get(person(org, "carol", groups=["payments"]), team.id).permissions == {SEARCH, ADMIN}
    with pytest.raises(SpaceNotFoundError):
        get(person(org, "dave", groups=["search"]), team.id)


def test_space_admin_implies_search(org, admin) -> None:
    team = make(admin, "Payments", Level.TEAM)
    grant(admin, team.id, "user:alice", ADMIN)

    assert get(person(org, "alice"), team.id).permissions == {SEARCH, ADMIN}


def test_putting_grants_replaces_the_subjects_permissions(org, admin) -> None:
    team = make(admin, "Payments", Level.TEAM)
    grant(admin, team.id, "user:alice", ADMIN)
    grant(admin, team.id, "user:alice", SEARCH)
    assert get(person(org, "alice"), team.id).permissions == {SEARCH}

    grant(admin, team.id, "user:alice")

    with pytest.raises(SpaceNotFoundError):
        get(person(org, "alice"), team.id)


def test_a_space_of_another_organisation_is_not_found(org, other_org, admin) -> None:
    foreign_admin = person(other_org, "root", SCOPE_CONTEXT_ADMIN)
    team = make(admin, "Payments", Level.TEAM)

    with pytest.raises(SpaceNotFoundError):
        get(foreign_admin, team.id)
    with pytest.raises(SpaceNotFoundError):
        make(foreign_admin, "Sneaky", Level.PROJECT, team.id)
    with pytest.raises(SpaceNotFoundError):
        grant(foreign_admin, team.id, "user:mallory", ADMIN)
    assert team.id not in listed(foreign_admin)


def test_a_space_id_that_is_not_a_uuid_is_not_found() -> None:
    with pytest.raises(SpaceNotFoundError):
        service.parse_space_id("not-a-uuid")


def test_creating_a_space_needs_admin_on_the_parent(org, admin) -> None:
    team = make(admin, "Payments", Level.TEAM)
    grant(admin, team.id, "user:searcher", SEARCH)
    grant(admin, team.id, "user:lead", ADMIN)

    with pytest.raises(ForbiddenError):
        make(person(org, "searcher"), "Billing", Level.PROJECT, team.id)
    with pytest.raises(SpaceNotFoundError):
        make(person(org, "stranger"), "Billing", Level.PROJECT, team.id)
    created = make(person(org, "lead"), "Billing", Level.PROJECT, team.id)
    assert created.parent_id == team.id


def test_a_top_level_space_needs_the_context_admin_scope(org, admin) -> None:
    with pytest.raises(SpaceNotFoundError):
        make(person(org, "alice"), "Engineering", Level.DEPARTMENT)

    created = make(admin, "Engineering", Level.DEPARTMENT)

    assert created.parent_id == org.space_id


@pytest.mark.parametrize(
    ("child", "parent"), [(Level.DEPARTMENT, Level.TEAM), (Level.TEAM, Level.TEAM)]
)
def test_a_space_must_sit_below_its_parents_level(org, admin, child, parent) -> None:
    upper = make(admin, "Upper", parent)

    with pytest.raises(ValidationFailedError, match="cannot be created under"):
        make(admin, "Lower", child, upper.id)


@pytest.mark.parametrize("level", [Level.ORGANISATION, Level.PERSONAL])
def test_organisation_and_personal_spaces_cannot_be_created(org, admin, level) -> None:
    with pytest.raises(ValidationFailedError):
        make(admin, "Nope", level)


def test_every_person_gets_a_personal_space_on_first_use(org) -> None:
    alice = person(org, "alice")

    first = listed(alice)
    second = listed(alice)

    personal = [sid for sid in first if get(alice, sid).level is Level.PERSONAL]
    assert len(personal) == 1
    assert first == second
    assert first[personal[0]] == {SEARCH, ADMIN}


def test_a_personal_space_is_its_owners_alone(org, admin) -> None:
    alice = person(org, "alice")
    (personal_id,) = listed(alice)
    grant(admin, org.space_id, "user:bob", ADMIN)

    with pytest.raises(SpaceNotFoundError):
        get(admin, personal_id)
    with pytest.raises(SpaceNotFoundError):
        get(person(org, "bob"), personal_id)
    with pytest.raises(ValidationFailedError, match="personal"):
        grant(alice, personal_id, "user:bob", SEARCH)


def test_a_service_caller_has_no_personal_space(org) -> None:
    bot = Principal(org_id=org.id, user_id="ci", client_id="ci", kind=PrincipalKind.SERVICE)

    assert listed(bot) == {}


def test_org_admin_sees_every_shared_space(org, admin) -> None:
    team = make(admin, "Payments", Level.TEAM)

    seen = listed(admin)

    assert seen[org.space_id] == {SEARCH, ADMIN}
    assert seen[team.id] == {SEARCH, ADMIN}


def test_grants_need_space_admin(org, admin) -> None:
    team = make(admin, "Payments", Level.TEAM)
    grant(admin, team.id, "user:alice", SEARCH)

    with pytest.raises(ForbiddenError):
        grant(person(org, "alice"), team.id, "user:alice", ADMIN)


@pytest.mark.parametrize("subject", ["alice", "role:x", "user:", "user:a b"])
def test_a_grant_subject_must_be_a_user_or_group(org, admin, subject) -> None:
    team = make(admin, "Payments", Level.TEAM)

    with pytest.raises(ValidationFailedError, match="subject"):
        grant(admin, team.id, subject, SEARCH)


def test_a_token_of_an_unregistered_organisation_sees_no_spaces(db) -> None:
    unknown = service.Organisation(id=uuid.uuid4(), name="nowhere", space_id=uuid.uuid4())

    assert listed(person(unknown, "alice")) == {}
