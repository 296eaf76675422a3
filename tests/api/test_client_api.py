"""The client package (clients/python) against the real local stack: loopback HTTP → the local
API Gateway → authorizer → the handlers Lambda runs, the writer appending through moto's SQS.
Each flow runs through the sync and the async client alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from api_support import run_coroutine

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN
from context_ledger_client import (
    AsyncContextLedger,
    AuthenticationError,
    ContextLedger,
    Memory,
    NewMemory,
    NotFoundError,
    PendingRevision,
    PermissionDeniedError,
    ValidationError,
)

REFUNDS = '''"""Refunds."""


def authorise_refund(order, amount):
    """A refund is authorised when the amount is at most what was paid."""
    if amount > order.paid:
        raise ValueError("refund above payment")
    return check_fraud(order)


def check_fraud(order):
    return order.score < 0.8
'''


def write_folder(root: Path) -> None:
    """Two indexable files, and one of each kind the walk skips."""
    (root / "billing").mkdir()
    (root / "billing" / "refunds.py").write_text(REFUNDS)
    (root / "README.md").write_text("# Billing\n\nRefunds are authorised by the billing team.\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    (root / "huge.log").write_text("x" * 5000)


def run_sync_flow(url: str, admin: str, alice: str, folder: Path) -> dict:
    """Everything a first user does, through the sync client; what it saw, for the asserts."""
    seen: dict = {"progress": []}
    with ContextLedger(url, admin) as cl:
        team = cl.create_space("Payments", level="team")
        project = cl.create_space("Billing", level="project", parent_id=team.id)
        cl.grant(team.id, "user:alice", ["context:space:search"])
        source = cl.create_source(project.id, "billing code", kind="codebase")
        seen["report"] = cl.index_folder(
            source.id,
            folder,
            max_file_bytes=1000,
            batch_bytes=300,  # one document a batch: progress is reported more than once
            progress=lambda done, total: seen["progress"].append((done, total)),
        )
        seen.update(team=team, project=project, source=source)
        seen["spaces"] = cl.spaces()
        seen["space"] = cl.space(project.id)
        seen["sources"] = cl.sources(project.id)
    with ContextLedger(url, alice) as cl:
        answer = cl.retrieve("authorise refund", space_id=project.id, token_budget=2000)
        seen["answer"] = answer
        seen["record"] = cl.wait_for_attribution(answer.attribution_id)
        cl.link(answer.attribution_id, "resp-1")
        cl.link(answer.attribution_id, "resp-1")  # idempotent: one link
        seen["linked"] = cl.attribution(answer.attribution_id)
        seen["by_request"] = cl.attributions(answer.request_id)
    return seen


async def run_async_flow(url: str, admin: str, alice: str, folder: Path) -> dict:
    """The same flow through the async client."""
    seen: dict = {"progress": []}
    async with AsyncContextLedger(url, admin) as cl:
        team = await cl.create_space("Payments", level="team")
        project = await cl.create_space("Billing", level="project", parent_id=team.id)
        await cl.grant(team.id, "user:alice", ["context:space:search"])
        source = await cl.create_source(project.id, "billing code", kind="codebase")
        seen["report"] = await cl.index_folder(
            source.id,
            folder,
            max_file_bytes=1000,
            batch_bytes=300,
            progress=lambda done, total: seen["progress"].append((done, total)),
        )
        seen.update(team=team, project=project, source=source)
        seen["spaces"] = await cl.spaces()
        seen["space"] = await cl.space(project.id)
        seen["sources"] = await cl.sources(project.id)
    async with AsyncContextLedger(url, alice) as cl:
        answer = await cl.retrieve("authorise refund", space_id=project.id, token_budget=2000)
        seen["answer"] = answer
        seen["record"] = await cl.wait_for_attribution(answer.attribution_id)
        await cl.link(answer.attribution_id, "resp-1")
        await cl.link(answer.attribution_id, "resp-1")
        seen["linked"] = await cl.attribution(answer.attribution_id)
        seen["by_request"] = await cl.attributions(answer.request_id)
    return seen


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_folder_indexed_through_the_client_is_retrieved_attributed_and_linked(
    runtime, org, token, flavour, tmp_path
) -> None:
    write_folder(tmp_path)
    admin, alice = token(org, "root", SCOPE_CONTEXT_ADMIN), token(org, "alice")

    if flavour == "sync":
        seen = run_sync_flow(runtime.url, admin, alice, tmp_path)
    else:
        seen = run_coroutine(run_async_flow(runtime.url, admin, alice, tmp_path))

    team, project, source, report = seen["team"], seen["project"], seen["source"], seen["report"]
    assert (team.level, project.level, project.parent_id) == ("team", "project", team.id)
    assert source.kind == "codebase"
    assert source.classification == "internal"
    # the index: two files sent, one of each skip reason counted and named
    assert (report.version, report.files) == (1, 2)
    assert report.chunks >= 3
    assert report.tokens > 0
    skipped = report.skipped
    assert (skipped.binary, skipped.too_large, skipped.unreadable) == (2, 1, 0)
    assert sorted(skipped.paths) == ["huge.log", "latin1.txt", "logo.png"]
    # progress counts files (sent or skipped) up to all of them
    totals = {total for _, total in seen["progress"]}
    assert totals == {5}
    assert len(seen["progress"]) > 1
    assert seen["progress"][-1] == (5, 5)
    assert [d for d, _ in seen["progress"]] == sorted(d for d, _ in seen["progress"])
    assert {s.id for s in seen["spaces"]} >= {team.id, project.id}
    assert seen["space"] == project
    assert [(s.id, s.index_version) for s in seen["sources"]] == [(source.id, 1)]

    answer = seen["answer"]
    top = answer.chunks[0]
    assert (top.path, top.symbol, top.level, top.kind) == (
        "billing/refunds.py",
        "authorise_refund",
        "project",
        "codebase",
    )
    assert top.start_line == 4
    assert top.end_line >= 8
    assert top.lines == f"4-{top.end_line}"
    assert top.score > 0
    assert top.tokens > 0
    assert "authorise_refund" in top.content
    assert top.related_to is None
    related = [c for c in answer.chunks if c.related_to is not None]
    assert [(c.symbol, c.related_relation, c.score) for c in related] == [
        ("check_fraud", "calls", 0.0)
    ]
    assert answer.tokens_used == sum(c.tokens for c in answer.chunks)
    assert answer.search_mode == "full_text"
    assert answer.warnings == ()
    assert [(s.id, s.chunks) for s in answer.sources_summary] == [(source.id, len(answer.chunks))]
    assert answer.raw["attributionId"] == answer.attribution_id

    record = seen["record"]
    assert (record.attribution_id, record.request_id) == (answer.attribution_id, answer.request_id)
    assert (record.user_id, record.space_id) == ("alice", project.id)
    assert record.record["client"]["clientName"] == "context-ledger-client"
    assert record.record["client"]["clientVersion"] == "0.1.0"
    assert [c["chunkId"] for c in record.record["chunks"]] == [c.id for c in answer.chunks]
    assert record.links == ()
    assert [link.response_id for link in seen["linked"].links] == ["resp-1"]
    assert [r.attribution_id for r in seen["by_request"]] == [answer.attribution_id]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_memories_round_trip_through_the_client(runtime, org, token, flavour) -> None:
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)

    async def flow_async() -> tuple:
        async with AsyncContextLedger(runtime.url, admin) as cl:
            first = await cl.write_memory(
                "billing-service",
                "We use Postgres, not MongoDB, because the ranking query needs joins.",
                type="decision",
                agent_key="planner",
                importance=0.9,
                metadata={"ticket": "ARCH-14"},
            )
            await cl.write_memory("billing-service", "Answer in under 200 ms.", type="constraint")
            listed = await cl.memories("billing-service", type="decision")
            relevant = await cl.relevant_memories(
                "billing-service", "which database did we pick", limit=1
            )
            revisions = await cl.memory_revisions("billing-service", first.id)
            return first, listed, relevant, revisions

    def flow_sync() -> tuple:
        with ContextLedger(runtime.url, admin) as cl:
            first = cl.write_memory(
                "billing-service",
                "We use Postgres, not MongoDB, because the ranking query needs joins.",
                type="decision",
                agent_key="planner",
                importance=0.9,
                metadata={"ticket": "ARCH-14"},
            )
            cl.write_memory("billing-service", "Answer in under 200 ms.", type="constraint")
            listed = cl.memories("billing-service", type="decision")
            relevant = cl.relevant_memories(
                "billing-service", "which database did we pick", limit=1
            )
            revisions = cl.memory_revisions("billing-service", first.id)
            return first, listed, relevant, revisions

    first, listed, relevant, revisions = (
        flow_sync() if flavour == "sync" else run_coroutine(flow_async())
    )

    assert isinstance(first, Memory)
    assert first.id.startswith("ctx_")
    assert (first.type, first.agent_key, first.importance) == ("decision", "planner", 0.9)
    assert first.metadata == {"ticket": "ARCH-14"}
    assert first.access_count == 0
    assert (listed.project_id, [m.id for m in listed.memories]) == ("billing-service", [first.id])
    assert relevant.query == "which database did we pick"
    assert relevant.tokens_used is None
    [best] = relevant.memories
    assert best.id == first.id
    assert 0 < best.score <= 1
    assert best.similarity > 0
    assert "HashingEmbeddingProvider" in best.justification
    assert [(r.revision, r.state, r.content) for r in revisions] == [(1, "accepted", first.content)]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_one_memory_a_batch_and_a_deduplicated_write_through_the_client(
    runtime, org, token, flavour
) -> None:
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    project = "billing-service"
    items = [
        NewMemory("We use Postgres.", type="decision", agent_key="planner", metadata={"t": 1}),
        NewMemory("Answer in under 200 ms.", type="constraint", dedupe=True),
    ]
    again = {"type": "decision", "dedupe": True}

    async def flow_async() -> tuple:
        async with AsyncContextLedger(runtime.url, admin) as cl:
            batch = await cl.write_memories(project, items)
            one = await cl.memory(project, batch.ids[0])
            duplicate = await cl.write_memory(project, "  we use POSTGRES. ", **again)
            copy = await cl.write_memory(project, "We use Postgres.", type="decision")
            with pytest.raises(NotFoundError) as unknown:
                await cl.memory(project, "ctx_000000000000")
            with pytest.raises(ValidationError) as bad:
                await cl.write_memories(project, [items[0], NewMemory(" ")])
            return batch, one, duplicate, copy, unknown.value, bad.value

    def flow_sync() -> tuple:
        with ContextLedger(runtime.url, admin) as cl:
            batch = cl.write_memories(project, items)
            one = cl.memory(project, batch.ids[0])
            duplicate = cl.write_memory(project, "  we use POSTGRES. ", **again)
            copy = cl.write_memory(project, "We use Postgres.", type="decision")
            with pytest.raises(NotFoundError) as unknown:
                cl.memory(project, "ctx_000000000000")
            with pytest.raises(ValidationError) as bad:
                cl.write_memories(project, [items[0], NewMemory(" ")])
            return batch, one, duplicate, copy, unknown.value, bad.value

    batch, one, duplicate, copy, unknown, bad = (
        flow_sync() if flavour == "sync" else run_coroutine(flow_async())
    )

    assert (batch.project_id, len(batch.ids), batch.duplicates, batch.pending) == (
        project,
        2,
        (),
        (),
    )
    assert (one.id, one.content, one.agent_key, one.metadata) == (
        batch.ids[0],
        "We use Postgres.",
        "planner",
        {"t": 1},
    )
    assert (duplicate.id, duplicate.duplicate, duplicate.updated_at) == (
        one.id,
        True,
        one.updated_at,
    )
    assert copy.id not in batch.ids
    assert copy.duplicate is False
    assert unknown.code == "memory.not_found"
    assert bad.code == "validation_failed"
    assert bad.message.startswith("memories.1.content: ")


def test_a_write_under_review_is_a_pending_revision(runtime, api, org, token, admin_headers):
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    with ContextLedger(runtime.url, admin) as cl:
        first = cl.write_memory("reviewed", "The first memory creates the project.")
        api.put("/api/context/reviewed/review", headers=admin_headers, json={"required": True})

        pending = cl.write_memory("reviewed", "This one waits for an admin.")

    assert isinstance(first, Memory)
    assert isinstance(pending, PendingRevision)
    assert (pending.project_id, pending.revision, pending.state) == ("reviewed", 1, "pending")


def test_a_space_the_caller_may_not_see_is_not_found(runtime, org, token) -> None:
    admin, mallory = token(org, "root", SCOPE_CONTEXT_ADMIN), token(org, "mallory")
    with ContextLedger(runtime.url, admin) as cl:
        team = cl.create_space("Payments", level="team")

    with ContextLedger(runtime.url, mallory) as cl, pytest.raises(NotFoundError) as denied:
        cl.retrieve("refunds", space_id=team.id)

    assert (denied.value.status, denied.value.code) == (404, "context.space.not_found")
    assert denied.value.message


def test_a_space_the_caller_may_not_see_is_not_found_async(runtime, org, token) -> None:
    admin, mallory = token(org, "root", SCOPE_CONTEXT_ADMIN), token(org, "mallory")

    async def denied() -> NotFoundError:
        async with AsyncContextLedger(runtime.url, admin) as cl:
            team = await cl.create_space("Payments", level="team")
        async with AsyncContextLedger(runtime.url, mallory) as cl:
            try:
                await cl.retrieve("refunds", space_id=team.id)
            except NotFoundError as exc:
                return exc
        raise AssertionError("the retrieval was served")

    error = run_coroutine(denied())
    assert (error.status, error.code) == (404, "context.space.not_found")


def test_a_bad_credential_is_an_authentication_error(runtime) -> None:
    cl = ContextLedger(runtime.url, "ctxl_not-a-key")
    with cl, pytest.raises(AuthenticationError) as e:
        cl.spaces()
    assert e.value.status == 401

    async def refused() -> AuthenticationError:
        async with AsyncContextLedger(runtime.url, "not.a.jwt") as cl:
            try:
                await cl.spaces()
            except AuthenticationError as exc:
                return exc
        raise AssertionError("the call was served")

    assert run_coroutine(refused()).status == 401


def test_refusals_carry_the_apis_code_and_message(runtime, org, token) -> None:
    with ContextLedger(runtime.url, token(org, "root", SCOPE_CONTEXT_ADMIN)) as cl:
        team = cl.create_space("Payments", level="team")
        cl.grant(team.id, "user:alice", ["context:space:search"])
    with ContextLedger(runtime.url, token(org, "alice")) as cl:
        with pytest.raises(PermissionDeniedError) as forbidden:
            # alice sees the team (she may search it) but may not administer it
            cl.create_space("Mine", level="project", parent_id=team.id)
        with pytest.raises(ValidationError) as invalid:
            cl.retrieve("refunds", token_budget=-1)
        with pytest.raises(NotFoundError) as missing:
            cl.attribution("00000000-0000-0000-0000-000000000000")

    assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")
    assert (invalid.value.status, invalid.value.code) == (422, "validation_failed")
    assert "tokenBudget" in invalid.value.message
    assert (missing.value.status, missing.value.code) == (404, "context.attribution.not_found")


def test_waiting_for_an_attribution_that_never_lands_ends_not_found(runtime, org, token) -> None:
    with ContextLedger(runtime.url, token(org, "alice")) as cl, pytest.raises(NotFoundError):
        cl.wait_for_attribution("00000000-0000-0000-0000-000000000000", timeout=0.6)


def test_the_readme_example_runs_as_written(runtime, org, token, tmp_path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "clients/python/README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in example.splitlines() if line.strip()]) == 15
    (tmp_path / "refunds.py").write_text(REFUNDS)
    env = {
        **os.environ,
        "CONTEXT_LEDGER_URL": runtime.url,
        "CONTEXT_LEDGER_TOKEN": token(org, "root", SCOPE_CONTEXT_ADMIN),
    }

    ran = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert ran.returncode == 0, ran.stderr
    assert "version 1: 1 files" in ran.stdout
    assert "refunds.py:4-" in ran.stdout  # the table
    assert "AttributionLink(response_id='my-answer-1'" in ran.stdout


def test_a_git_checkout_is_indexed_as_git_lists_it(runtime, org, token, tmp_path) -> None:
    (tmp_path / ".gitignore").write_text("*.tmp\nbuild/\n")
    (tmp_path / "refunds.py").write_text(REFUNDS)
    (tmp_path / "scratch.tmp").write_text("ignored by .gitignore")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.py").write_text("ignored = True\n")
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xff.py"), "wb") as f:
        f.write(b"name_not_utf8 = True\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)

    with ContextLedger(runtime.url, admin) as cl:
        team = cl.create_space("Payments", level="team")
        source = cl.create_source(team.id, "billing code", kind="codebase")
        report = cl.index_folder(source.id, tmp_path)
        answer = cl.retrieve("ignored scratch name_not_utf8 refund", space_id=team.id)

    assert report.files == 2  # .gitignore and refunds.py; nothing git ignores
    assert (report.skipped.bad_name, report.skipped.paths) == (1, ("bad\\xff.py",))
    assert {c.path for c in answer.chunks} <= {".gitignore", "refunds.py"}


def test_a_failed_index_build_is_aborted_and_the_published_version_kept(
    runtime, api, org, token, admin_headers, tmp_path
) -> None:
    (tmp_path / "refunds.py").write_text(REFUNDS)
    admin = token(org, "root", SCOPE_CONTEXT_ADMIN)
    with ContextLedger(runtime.url, admin) as cl:
        team = cl.create_space("Payments", level="team")
        source = cl.create_source(team.id, "billing code", kind="codebase")
        cl.index_folder(source.id, tmp_path)
        # a document over the API's 2,000,000 characters, let through by a raised file limit
        (tmp_path / "zz_huge.txt").write_text("refund " * 300_000)
        with pytest.raises(ValidationError) as refused:
            cl.index_folder(source.id, tmp_path, max_file_bytes=5_000_000)
        [kept] = cl.sources(team.id)

    assert refused.value.status == 422
    assert refused.value.__notes__ == [
        "index version 2 aborted; the published version is unchanged"
    ]
    assert kept.index_version == 1
    versions = api.get(f"/api/v1/context/sources/{source.id}/index-versions", headers=admin_headers)
    assert {v["version"]: v["state"] for v in versions.json()["versions"]}[2] == "aborted"
