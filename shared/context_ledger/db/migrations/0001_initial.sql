-- Context Ledger initial schema.
-- Tenancy: every row that belongs to an organisation carries org_id, and references to rows of
-- the same tenant use composite (org_id, id) foreign keys, so the database itself refuses a
-- cross-organisation link even if application code got one wrong.

CREATE TABLE organisations (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Spaces form a tree per organisation: organisation > business_unit > department > group > team >
-- project > subproject, plus one personal space per user under the organisation space.
CREATE TABLE spaces (
    id             uuid NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    org_id         uuid NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    parent_id      uuid,
    level          text NOT NULL CHECK (level IN ('organisation', 'business_unit', 'department',
                       'group', 'team', 'project', 'subproject', 'personal')),
    name           text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    key            text CHECK (key ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
    owner_user_id  text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, id),
    FOREIGN KEY (org_id, parent_id) REFERENCES spaces (org_id, id) ON DELETE CASCADE,
    CHECK ((level = 'personal') = (owner_user_id IS NOT NULL)),
    CHECK ((level = 'organisation') = (parent_id IS NULL))
);
CREATE UNIQUE INDEX spaces_org_key ON spaces (org_id, key) WHERE key IS NOT NULL;
CREATE UNIQUE INDEX spaces_personal_owner ON spaces (org_id, owner_user_id) WHERE level = 'personal';
CREATE UNIQUE INDEX spaces_org_root ON spaces (org_id) WHERE level = 'organisation';
CREATE INDEX spaces_parent ON spaces (parent_id);

-- A grant on a space applies to the space and its descendants (personal spaces excepted).
CREATE TABLE grants (
    org_id      uuid NOT NULL,
    space_id    uuid NOT NULL,
    subject     text NOT NULL CHECK (subject ~ '^(user|group):.+$'),
    permission  text NOT NULL CHECK (permission IN ('context:space:search', 'context:space:admin')),
    granted_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, subject, permission),
    FOREIGN KEY (org_id, space_id) REFERENCES spaces (org_id, id) ON DELETE CASCADE
);
CREATE INDEX grants_subject ON grants (org_id, subject);

-- API keys are stored as SHA-256 of the whole key: keys are 256-bit random, so a slow hash adds
-- nothing, and lookup by hash stays one index probe.
CREATE TABLE api_keys (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id        uuid NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    user_id       text NOT NULL,
    client_id     text NOT NULL,
    name          text NOT NULL DEFAULT '',
    key_hash      bytea NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    key_prefix    text NOT NULL,
    scopes        text[] NOT NULL DEFAULT '{}',
    groups        text[] NOT NULL DEFAULT '{}',
    is_service    boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    revoked_at    timestamptz
);

CREATE TABLE sources (
    id              uuid NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY,
    org_id          uuid NOT NULL,
    space_id        uuid NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('codebase', 'docs', 'conversations', 'issues',
                        'workspace_live', 'regulatory', 'custom')),
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    classification  text NOT NULL DEFAULT 'internal' CHECK (classification IN
                        ('public', 'internal', 'confidential', 'restricted', 'regulated')),
    index_version   integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, id),
    FOREIGN KEY (org_id, space_id) REFERENCES spaces (org_id, id) ON DELETE CASCADE
);
CREATE INDEX sources_space ON sources (space_id);

-- A source is searched only at sources.index_version; other versions are builds in progress or
-- superseded ones waiting for removal.
CREATE TABLE index_versions (
    source_id       uuid NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    version         integer NOT NULL CHECK (version > 0),
    state           text NOT NULL CHECK (state IN ('building', 'published', 'superseded')),
    document_count  integer NOT NULL DEFAULT 0,
    chunk_count     integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    published_at    timestamptz,
    PRIMARY KEY (source_id, version)
);

-- Embeddings are real[] so the default (exact cosine in SQL) backend works without pgvector;
-- the pgvector backend adds its own column and HNSW index in a later migration.
CREATE TABLE chunks (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id          uuid NOT NULL,
    source_id       uuid NOT NULL,
    index_version   integer NOT NULL,
    ordinal         integer NOT NULL,
    path            text NOT NULL,
    language        text,
    symbol          text,
    start_line      integer,
    end_line        integer,
    content         text NOT NULL,
    content_sha256  bytea NOT NULL CHECK (length(content_sha256) = 32),
    token_count     integer NOT NULL CHECK (token_count >= 0),
    tsv             tsvector NOT NULL,
    embedding       real[],
    embedding_model text,
    metadata        jsonb NOT NULL DEFAULT '{}',
    FOREIGN KEY (source_id, index_version) REFERENCES index_versions (source_id, version)
        ON DELETE CASCADE,
    FOREIGN KEY (org_id, source_id) REFERENCES sources (org_id, id) ON DELETE CASCADE
);
CREATE INDEX chunks_source_version ON chunks (source_id, index_version);
CREATE INDEX chunks_tsv ON chunks USING gin (tsv);
CREATE INDEX chunks_sha ON chunks (source_id, content_sha256);

CREATE TABLE code_edges (
    source_id      uuid NOT NULL,
    index_version  integer NOT NULL,
    from_chunk_id  uuid NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    to_chunk_id    uuid NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    relation       text NOT NULL CHECK (relation IN ('calls', 'tested_by')),
    PRIMARY KEY (from_chunk_id, to_chunk_id, relation),
    FOREIGN KEY (source_id, index_version) REFERENCES index_versions (source_id, version)
        ON DELETE CASCADE
);
CREATE INDEX code_edges_to ON code_edges (to_chunk_id, relation);

-- The evidence chain: append-only, one HMAC chain per `chain` name. `record` holds the canonical
-- encoding the MAC covers; record_id makes appends idempotent under SQS redelivery.
CREATE TABLE evidence_chain (
    chain       text NOT NULL,
    seq         bigint NOT NULL CHECK (seq > 0),
    record_id   uuid NOT NULL UNIQUE,
    category    text NOT NULL,
    org_id      uuid,
    record      bytea NOT NULL,
    key_id      text NOT NULL,
    prev_mac    bytea NOT NULL,
    mac         bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain, seq)
);
CREATE INDEX evidence_chain_org_category ON evidence_chain (org_id, category, created_at);

-- The head row per chain is locked (SELECT ... FOR UPDATE) by every append: concurrent writers
-- queue on it, so the chain never forks.
CREATE TABLE evidence_chain_heads (
    chain  text PRIMARY KEY,
    seq    bigint NOT NULL,
    mac    bytea NOT NULL
);

CREATE TABLE evidence_checkpoints (
    chain        text NOT NULL,
    seq          bigint NOT NULL,
    mac          bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain, seq)
);

CREATE FUNCTION evidence_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'evidence_chain is append-only';
END;
$$;
CREATE TRIGGER evidence_chain_no_update BEFORE UPDATE OR DELETE ON evidence_chain
    FOR EACH ROW EXECUTE FUNCTION evidence_append_only();

-- Lookup index over context_attribution records (the chain itself is the evidence).
CREATE TABLE attributions (
    attribution_id  uuid PRIMARY KEY,
    request_id      text NOT NULL,
    org_id          uuid NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    user_id         text NOT NULL,
    space_id        uuid,
    chain           text NOT NULL,
    seq             bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (chain, seq) REFERENCES evidence_chain (chain, seq)
);
CREATE INDEX attributions_request ON attributions (org_id, request_id);

CREATE TABLE attribution_links (
    attribution_id  uuid NOT NULL REFERENCES attributions (attribution_id),
    response_id     text NOT NULL CHECK (length(response_id) BETWEEN 1 AND 256),
    chain           text NOT NULL,
    seq             bigint NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (attribution_id, response_id),
    FOREIGN KEY (chain, seq) REFERENCES evidence_chain (chain, seq)
);

CREATE TABLE model_logs (
    id                  uuid PRIMARY KEY,
    org_id              uuid NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    user_id             text NOT NULL,
    client_id           text,
    endpoint            text NOT NULL,
    model               text,
    status              integer,
    context_request_id  text,
    link_outcome        text CHECK (link_outcome IN ('linked', 'not_found', 'denied', 'error')),
    latency_ms          integer,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX model_logs_context ON model_logs (org_id, context_request_id);

-- Memory API: an entry's served content is its accepted revision.
CREATE TABLE memory_entries (
    id                 text PRIMARY KEY CHECK (id ~ '^ctx_[0-9a-f]{12}$'),
    org_id             uuid NOT NULL,
    space_id           uuid NOT NULL,
    agent_key          text,
    accepted_revision  integer,
    latest_revision    integer NOT NULL DEFAULT 0,
    access_count       integer NOT NULL DEFAULT 0,
    last_accessed_at   timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    deleted_at         timestamptz,
    FOREIGN KEY (org_id, space_id) REFERENCES spaces (org_id, id) ON DELETE CASCADE
);
CREATE INDEX memory_entries_space ON memory_entries (space_id, created_at DESC);

CREATE TABLE memory_revisions (
    entry_id            text NOT NULL REFERENCES memory_entries (id) ON DELETE CASCADE,
    revision            integer NOT NULL CHECK (revision > 0),
    type                text NOT NULL,
    content             text NOT NULL,
    confidence          real CHECK (confidence BETWEEN 0 AND 1),
    importance          real CHECK (importance BETWEEN 0 AND 1),
    metadata            jsonb NOT NULL DEFAULT '{}',
    embedding           real[],
    embedding_provider  text,
    state               text NOT NULL CHECK (state IN ('pending', 'accepted', 'rejected', 'superseded')),
    author_user_id      text NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    accepted_at         timestamptz,
    accepted_by         text,
    PRIMARY KEY (entry_id, revision)
);
