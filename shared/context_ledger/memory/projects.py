"""Project keys: a project-level space of the caller's organisation, found by its key.

Permissions (docs/decisions.md, "Memory API permissions"):

- reading memories (list, /relevant, revisions) and recording an access need
  ``context:space:search`` on the project space;
- writing (create, patch, delete) needs ``context:space:admin`` on it: what is written is served to
  every reader of the space and of the context API. In a project that requires review, searchers
  may propose (create, patch): their revisions wait until an admin accepts them;
- the first write to an unknown key creates the project under the organisation space, which needs
  ``context:space:admin`` there (the ``context:admin`` scope has it), as creating any space does.

A key the caller cannot see answers ``404 memory.project.not_found`` exactly like a key that does
not exist (or exists in another organisation), whatever the request.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

import psycopg

from context_ledger.auth.principal import Principal
from context_ledger.errors import ForbiddenError, NotFoundError, SpaceNotFoundError
from context_ledger.memory import store
from context_ledger.memory.embedding import MEMORY_CLASSIFICATION
from context_ledger.memory.model import PROJECT_KEY
from context_ledger.sources import store as sources_store
from context_ledger.sources.model import SourceKind
from context_ledger.spaces import store as spaces_store
from context_ledger.spaces.levels import Level
from context_ledger.spaces.permissions import Permission, permissions_on
from context_ledger.spaces.service import authorize_space

#: Memories are agent-written notes, not conversations: their source is a ``custom`` one.
MEMORY_SOURCE_KIND = SourceKind.CUSTOM


class ProjectNotFoundError(NotFoundError):
    """The project key does not exist in the caller's organisation, or is hidden from it."""

    code = "memory.project.not_found"

    def __init__(self) -> None:
        super().__init__("project not found")


@dataclass(frozen=True)
class Project:
    key: str
    org_id: uuid.UUID
    space_id: uuid.UUID
    source_id: uuid.UUID | None
    review_required: bool = False


def _authorized(
    conn: psycopg.Connection, principal: Principal, row: store.Row, permission: Permission
) -> Project:
    if row["level"] != Level.PROJECT.value:
        raise ProjectNotFoundError()
    permissions = permissions_on(
        conn,
        principal,
        space_id=row["space_id"],
        level=Level.PROJECT,
        owner_user_id=row["owner_user_id"],
    )
    if not permissions:
        raise ProjectNotFoundError()
    if permission not in permissions:
        raise ForbiddenError(f"this needs {permission.value} on the project")
    return Project(
        key=row["key"],
        org_id=row["org_id"],
        space_id=row["space_id"],
        source_id=row["source_id"],
        review_required=row["review_required"],
    )


def _with_source(conn: psycopg.Connection, project: Project) -> Project:
    """The project with a memory source, a new one if it has none (its first write, or its source
    was deleted through the sources API)."""
    if project.source_id is not None:
        return project
    source = sources_store.insert_source(
        conn,
        org_id=project.org_id,
        space_id=project.space_id,
        kind=MEMORY_SOURCE_KIND.value,
        name=f"Memories of {project.key}",
        classification=MEMORY_CLASSIFICATION.value,
    )
    sources_store.publish_first_version(conn, source_id=source["id"])
    store.insert_project(
        conn, org_id=project.org_id, space_id=project.space_id, source_id=source["id"]
    )
    return replace(project, source_id=source["id"], review_required=False)


def find_project(
    conn: psycopg.Connection, principal: Principal, key: str, permission: Permission
) -> Project:
    """The project if the caller holds ``permission`` on it: 404 when the caller cannot see it
    (or it does not exist), 403 when it can see it but lacks the permission. A caller allowed to
    write also gets a memory source."""
    if not PROJECT_KEY.fullmatch(key):
        raise ProjectNotFoundError()
    row = store.project(conn, org_id=principal.org_id, key=key)
    if row is None:
        raise ProjectNotFoundError()
    project = _authorized(conn, principal, row, permission)
    return _with_source(conn, project) if permission is Permission.ADMIN else project


def find_project_to_propose(conn: psycopg.Connection, principal: Principal, key: str) -> Project:
    """The project for a new revision: admin writes, or a searcher's where review is required."""
    project = find_project(conn, principal, key, Permission.SEARCH)
    if project.review_required:
        return _with_source(conn, project)
    return find_project(conn, principal, key, Permission.ADMIN)


def project_for_write(conn: psycopg.Connection, principal: Principal, key: str) -> Project:
    """The project to write into, created on the first write to its key.

    Creating needs ``context:space:admin`` on the organisation space; a caller without it gets
    the same 404 as for a project it cannot see, so keys of hidden projects stay hidden.
    """
    store.lock_project_key(conn, org_id=principal.org_id, key=key)
    if store.project(conn, org_id=principal.org_id, key=key) is not None:
        return find_project_to_propose(conn, principal, key)
    root = spaces_store.organisation_space(conn, org_id=principal.org_id)
    if root is None:
        raise ProjectNotFoundError()
    try:
        authorize_space(conn, principal, root["id"], Permission.ADMIN, action="creating a project")
    except (SpaceNotFoundError, ForbiddenError):
        raise ProjectNotFoundError() from None
    space = spaces_store.insert_space(
        conn,
        org_id=principal.org_id,
        parent_id=root["id"],
        level=Level.PROJECT,
        name=key,
        key=key,
    )
    project = Project(key=key, org_id=principal.org_id, space_id=space["id"], source_id=None)
    return _with_source(conn, project)
